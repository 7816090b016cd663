#include "codegen/profiles.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "src/diag/errors.h"

namespace tcc {

namespace {

using nlohmann::json;

// The profiles are part of the binary, so a malformed one is tcc's bug, caught
// by the first test that lists the modes.
json parse_profile(const ProfileFile& f) {
  try {
    return json::parse(f.text);
  } catch (const json::exception& e) {
    TCC_CHECK(false) << "profiles/" << f.path << " is not valid JSON: " << e.what();
  }
  return {};
}

template <typename T>
T field(const json& j, const char* key, const ProfileFile& f) {
  TCC_CHECK(j.contains(key)) << "profiles/" << f.path << " has no '" << key << "'";
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    TCC_CHECK(false) << "profiles/" << f.path << ": '" << key << "': " << e.what();
  }
  return T{};
}

bool under(const ProfileFile& f, const std::string& dir) { return std::string(f.path).rfind(dir + "/", 0) == 0; }

struct Profiles {
  std::vector<Feature> features;
  std::vector<CompileMode> modes;
  std::vector<DeviceProfile> devices;
};

const Profiles& profiles() {
  static const Profiles p = [] {
    Profiles p;
    for (const ProfileFile& f : embedded_profile_files()) {
      if (std::string(f.path) != "features.json") continue;
      for (const json& j : field<json>(parse_profile(f), "features", f)) {
        Feature feat;
        feat.name = field<std::string>(j, "name", f);
        feat.description = field<std::string>(j, "description", f);
        std::string status = field<std::string>(j, "status", f);
        TCC_CHECK(status == "built" || status == "unbuilt")
            << "profiles/" << f.path << ": feature '" << feat.name << "' has status '" << status << "'";
        feat.built = status == "built";
        if (!feat.built) feat.why = field<std::string>(j, "why", f);
        p.features.push_back(std::move(feat));
      }
    }
    // Modes point into `features`, which no longer grows.
    for (const ProfileFile& f : embedded_profile_files()) {
      if (under(f, "modes")) {
        json j = parse_profile(f);
        CompileMode m;
        m.name = field<std::string>(j, "name", f);
        m.description = field<std::string>(j, "description", f);
        for (const std::string& name : field<std::vector<std::string>>(j, "features", f)) {
          auto it = std::find_if(p.features.begin(), p.features.end(),
                                 [&](const Feature& x) { return x.name == name; });
          TCC_CHECK(it != p.features.end()) << "profiles/" << f.path << " turns on unknown feature '" << name << "'";
          m.features.push_back(&*it);
        }
        p.modes.push_back(std::move(m));
      } else if (under(f, "devices")) {
        json j = parse_profile(f);
        DeviceProfile d;
        d.name = field<std::string>(j, "name", f);
        d.description = field<std::string>(j, "description", f);
        d.arch = field<std::string>(j, "arch", f);
        d.sms = field<int>(j, "sms", f);
        TCC_CHECK(d.sms > 0) << "profiles/" << f.path << " has " << d.sms << " SMs";
        d.split_blocks_per_sm = field<int>(j, "split_blocks_per_sm", f);
        d.column_blocks_per_sm = field<int>(j, "column_blocks_per_sm", f);
        TCC_CHECK(d.split_blocks_per_sm > 0 && d.column_blocks_per_sm > 0)
            << "profiles/" << f.path << " aims for no blocks per SM";
        d.bytes_per_s = field<double>(j, "memory_bandwidth_tb_per_s", f) * 1e12;
        d.tensor_flop_per_s = field<double>(j, "tensor_core_tflop_per_s", f) * 1e12;
        d.fp32_flop_per_s = field<double>(j, "fp32_tflop_per_s", f) * 1e12;
        p.devices.push_back(std::move(d));
      }
    }
    auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
    std::sort(p.modes.begin(), p.modes.end(), by_name);
    std::sort(p.devices.begin(), p.devices.end(), by_name);
    TCC_CHECK(!p.modes.empty() && !p.devices.empty()) << "no compile modes or device profiles were embedded";
    return p;
  }();
  return p;
}

template <typename T>
const T& find_named(const std::vector<T>& items, const std::string& name, const char* what) {
  std::string known;
  for (const T& x : items) {
    if (x.name == name) return x;
    known += (known.empty() ? "" : ", ") + x.name;
  }
  throw InputError("unknown " + std::string(what) + " '" + name + "' (valid: " + known + ")");
}

}  // namespace

const std::vector<Feature>& all_features() { return profiles().features; }
const std::vector<CompileMode>& all_modes() { return profiles().modes; }
const std::vector<DeviceProfile>& all_devices() { return profiles().devices; }

const CompileMode& find_mode(const std::string& name) { return find_named(all_modes(), name, "mode"); }
const DeviceProfile& find_device(const std::string& name) { return find_named(all_devices(), name, "device"); }
const DeviceProfile& default_device() { return find_device(kDefaultDevice); }

std::string modes_table() {
  std::ostringstream os;
  for (const CompileMode& m : all_modes()) {
    os << m.name << "\n  " << m.description << "\n";
    for (const Feature* f : m.features) {
      os << "  + " << f->name;
      if (!f->built) os << " (unbuilt: " << f->why << ")";
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace tcc
