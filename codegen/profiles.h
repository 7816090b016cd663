// Compile modes and device profiles: the data under profiles/ (see its
// README), compiled into the binary by cmake/embed_profiles.cmake so that tcc
// finds them from any working directory and wherever the binary is copied.
#pragma once

#include <string>
#include <vector>

namespace tcc {

// Something a mode can turn on, and whether tcc implements it yet. An unbuilt
// feature is reported as such in the module's manifest, never pretended.
struct Feature {
  std::string name;
  std::string description;
  bool built = false;
  std::string why;  // unbuilt: when it arrives
};

struct CompileMode {
  std::string name;
  std::string description;
  std::vector<const Feature*> features;  // what it turns on
};

// A GPU the compile targets: its SM count and the blocks per SM the split
// reductions aim for, for the schedule's decisions (codegen/kernel_schedule.h),
// its peak rates for the roofline estimates of the compile report.
struct DeviceProfile {
  std::string name;         // --device value: "h100"
  std::string description;  // "NVIDIA H100 SXM 80GB (HBM3)"
  std::string arch;         // "sm_90"
  int sms = 0;
  int split_blocks_per_sm = 0;   // blocks in all, per SM, for a few long rows split among blocks
  int column_blocks_per_sm = 0;  // the same for column reductions' slices
  double bytes_per_s = 0;        // peak memory bandwidth
  double tensor_flop_per_s = 0;  // dense f16/bf16 on tensor cores
  double fp32_flop_per_s = 0;    // f32 without tensor cores
};

// The device `tcc compile` targets without --device.
inline constexpr const char* kDefaultDevice = "h100";

const std::vector<Feature>& all_features();
const std::vector<CompileMode>& all_modes();      // by name
const std::vector<DeviceProfile>& all_devices();  // by name

// An unknown name is an InputError listing the known ones.
const CompileMode& find_mode(const std::string& name);
const DeviceProfile& find_device(const std::string& name);
const DeviceProfile& default_device();  // find_device(kDefaultDevice)

// The table `tcc compile --list-modes` prints: each mode, its description and
// its features, unbuilt ones marked with the reason.
std::string modes_table();

// One JSON file of profiles/, as embedded at build time.
struct ProfileFile {
  const char* path;  // relative to profiles/: "modes/default.json"
  const char* text;
};
const std::vector<ProfileFile>& embedded_profile_files();  // generated source

}  // namespace tcc
