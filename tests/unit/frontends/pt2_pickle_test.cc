// Malformed torch.save'd dicts in the archives torch 2.7 and 2.8 write: the
// state dict of tests/pt2/torch2.7/mlp.pt2 (serialized_state_dict.pt, a zip
// inside the zip) with one thing changed, rewritten here through libzip. Each
// is an InputError (exit 2) whose whole message names the archive, the nested
// entry, the pickle's byte and what was expected (the offsets are those
// `python -m pickletools` shows for the fixture's data.pkl); none crashes,
// runs anything or reads outside the storages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "frontends/load_model.h"
#include "frontends/read_file.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"
#include "tests/unit/support/zip_entries.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

const fs::path kPt2 = fs::path(TCC_SOURCE_DIR) / "tests/pt2";

std::string& entry(ZipEntries& entries, const std::string& name) {
  for (auto& [n, data] : entries)
    if (n == name) return data;
  ADD_FAILURE() << "no entry " << name;
  return entries[0].second;
}

void replace_once(std::string& s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << "no '" << from << "' in the pickle";
  ASSERT_EQ(s.find(from, at + 1), std::string::npos) << "'" << from << "' appears twice in the pickle";
  s.replace(at, from.size(), to);
}

class Pt2PickleBadInput : public TempDirTest {
 protected:
  // `archive` (below tests/pt2) holds the torch.save zip `saved`.
  void open(const std::string& archive, const std::string& saved) {
    saved_ = saved;
    outer_ = read_zip(read_file_bytes((kPt2 / archive).string(), "model"));
    inner_ = read_zip(entry(outer_, saved_));
  }
  void SetUp() override {
    TempDirTest::SetUp();
    open("torch2.7/mlp.pt2", "serialized_state_dict.pt");
  }

  std::string& pickle() { return entry(inner_, "archive/data.pkl"); }

  fs::path write() {
    entry(outer_, saved_) = write_zip(inner_);
    fs::path p = dir_ / "bad.pt2";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << write_zip(outer_);
    return p;
  }

  // The InputError's message loading the rewritten archive.
  std::string error() {
    fs::path p = write();
    return input_error([&] { load_model(p.string()); });
  }

  // "<dir>/bad.pt2/serialized_state_dict.pt: entry 'archive/data.pkl': "
  std::string where(const std::string& inner_entry = "data.pkl") const {
    return (dir_ / "bad.pt2").string() + "/" + saved_ + ": entry 'archive/" + inner_entry + "': ";
  }

  std::string saved_;
  ZipEntries outer_, inner_;
};

TEST_F(Pt2PickleBadInput, RewrittenArchiveStillLoads) { EXPECT_NO_THROW(load_model(write().string())); }

// Cut inside the key 'storage' of fc1.weight's persistent id (BINUNICODE at byte 95).
TEST_F(Pt2PickleBadInput, Truncated) {
  pickle().resize(100);
  EXPECT_EQ(error(), where() + "the pickle ends inside its BINUNICODE at byte 95 (truncated?)");
  pickle().resize(95);
  EXPECT_EQ(error(), where() + "the pickle ends at byte 95 without STOP (truncated?)");
}

// fc1.weight's backward hooks (GLOBAL collections.OrderedDict at byte 173).
TEST_F(Pt2PickleBadInput, UnknownGlobal) {
  replace_once(pickle(), "ccollections\nOrderedDict\n", "cos\nsystem\n");
  EXPECT_EQ(error(), where() + "at byte 173: the global 'os.system' is not one torch.save writes for a dict of tensors "
                               "(collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
                               "torch._utils._rebuild_parameter or a torch.<Dtype>Storage)");
}

// The dict itself (EMPTY_DICT at byte 2) made an EMPTY_LIST.
TEST_F(Pt2PickleBadInput, UnknownOpcode) {
  replace_once(pickle(), std::string("\x80\x02}", 3), std::string("\x80\x02]", 3));
  EXPECT_EQ(error(), where() + "at byte 2: opcode 0x5d is not one torch.save writes for a dict of tensors");
}

// fc1.bias's _rebuild_parameter (BINGET 2 at byte 238) reads a slot never stored.
TEST_F(Pt2PickleBadInput, MemoSlotNeverStored) {
  ASSERT_EQ(pickle().substr(238, 2), "h\x02");
  pickle()[239] = '\xc8';
  EXPECT_EQ(error(), where() + "at byte 238: BINGET of memo slot 200, which nothing stored");
}

// fc1.weight's storage key '0' made '../0': its BINPERSID moves from byte 155 to 158.
TEST_F(Pt2PickleBadInput, StorageKeyEscapingItsFolder) {
  replace_once(pickle(), std::string("X\x01\x00\x00\x00" "0", 6), std::string("X\x04\x00\x00\x00" "../0", 9));
  EXPECT_EQ(error(), where() + "at byte 158: the storage key '../0' is not a plain name (torch.save writes a number)");
}

// fc1.weight's storage (512 elements, BININT2) declared and written as 16.
TEST_F(Pt2PickleBadInput, StorageSmallerThanItsTensor) {
  replace_once(pickle(), std::string("M\x00\x02", 3), "K\x10");
  std::string& storage = entry(inner_, "archive/data/0");
  storage.resize(64);
  EXPECT_EQ(error(), where("data/0") + "holds 16 elements, but tensor 'fc1.weight' of shape [32, 16] reads element 511");
  storage.resize(60);
  EXPECT_EQ(error(), where("data/0") + "holds 60 bytes, but the pickle declares 16 f32 elements (64 bytes) for tensor "
                                       "'fc1.weight'");
}

// torch 2.8 keeps the dict in the archive's folder (data/weights/model.pt);
// the CLI exits 2 naming the nested entry.
TEST_F(Pt2PickleBadInput, Torch28ArchiveCliExitsTwo) {
  open("torch2.8/mlp.pt2", "mlp/data/weights/model.pt");
  replace_once(pickle(), "ccollections\nOrderedDict\n", "cos\nsystem\n");
  CliResult r = run_tcc("opt " + shell_quote(write().string()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(where() + "at byte 173: the global 'os.system' is not one torch.save writes"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tcc
