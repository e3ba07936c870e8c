// Guards of a run directory (trainer.hpp, study.hpp): one run at a time in it, no new run over an
// old one, and the old run moved aside rather than deleted when asked (--overwrite).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cotan::train {

// An exclusive flock(2) on DIR/.lock, held while the object lives (the kernel drops it when the
// process dies, however it dies). The file records the holder's pid and command line, so that a
// second run fails at once, naming it:
//   [train] runs/pretrain is in use by process 4242 (cotan pretrain --steps 300)
// The constructor creates the directory when absent: "[op] cannot create run directory ...".
// Releasing the lock removes the file, and the directory too when the constructor created it and
// it is still empty: a start that fails leaves no debris. (A process killed outright leaves its
// .lock, which the next run takes over.) A lock file unlinked by its holder between another's
// open and flock is detected by comparing inodes, and the other opens the new file.
class RunDirLock {
 public:
  RunDirLock(const std::string& dir, std::string_view op);
  ~RunDirLock();
  RunDirLock(RunDirLock&& other) noexcept;  // returned by value; never copied or assigned
  RunDirLock& operator=(RunDirLock&&) = delete;

 private:
  void release() noexcept;
  int fd_ = -1;
  std::string dir_, path_;
  bool created_ = false;  // the constructor made dir_
};

inline constexpr const char* kLockFileName = ".lock";

// The entries of dir other than the lock file (and the lock's write probe), sorted (none when dir
// does not exist).
std::vector<std::string> run_dir_entries(const std::string& dir);

// "metrics.jsonl, checkpoint/ and 2 more": a few names for a message.
std::string describe_entries(const std::string& dir, const std::vector<std::string>& names);

// Moves the entries of dir (all but the lock file) into the first free sibling DIR.old-1,
// DIR.old-2, ... and returns its path. Nothing is deleted. A dir named ".", ".." or with a trailing
// slash is named by its absolute path first ("." in /home/me/run gives /home/me/run.old-1); the
// root directory has no sibling and is refused. When a move fails, the entries moved so far go
// back and the sibling is removed before the error: "[op] cannot move DIR/x to DIR.old-1: reason".
std::string move_run_aside(const std::string& dir, std::string_view op);

// The path move_run_aside and messages use for dir: lexically normal, no trailing slash, and
// absolute when dir ends in "." or "..".
std::string run_dir_name(const std::string& dir);

}  // namespace cotan::train
