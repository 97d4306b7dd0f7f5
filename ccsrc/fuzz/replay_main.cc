// Corpus replay: a main() for a fuzz harness built without libFuzzer, so the ordinary test
// build (any compiler) runs every committed corpus input through the same properties.
//
//   <harness>_replay <file or directory>...
//
// Each directory contributes its regular files, in name order. A harness reports a violation
// by trapping, so each input runs in a forked child: one failing input does not hide the
// others, and the summary names every one that failed. An empty corpus is also a failure,
// because it usually means a wrong path and would otherwise pass silently.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool CollectInputs(const fs::path& path, std::vector<fs::path>* inputs) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    inputs->push_back(path);
    return true;
  }
  if (!fs::is_directory(path, error)) {
    std::fprintf(stderr, "replay: no such file or directory: %s\n", path.c_str());
    return false;
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    if (entry.is_regular_file(error)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  inputs->insert(inputs->end(), files.begin(), files.end());
  return !error;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus file or directory>...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) return 2;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: the corpus is empty\n");
    return 2;
  }
  std::vector<std::string> failures;
  for (const fs::path& input : inputs) {
    std::ifstream file(input, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(file),
                                  std::istreambuf_iterator<char>()};
    if (!file.good() && !file.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", input.c_str());
      return 2;
    }
    std::fflush(nullptr);  // the child must not repeat buffered output
    const pid_t child = fork();
    if (child < 0) {
      std::perror("replay: fork");
      return 2;
    }
    if (child == 0) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      std::exit(0);  // not _exit: LeakSanitizer and coverage write their reports at exit
    }
    int wait_status = 0;
    if (waitpid(child, &wait_status, 0) != child) {
      std::perror("replay: waitpid");
      return 2;
    }
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) continue;
    const std::string how = WIFSIGNALED(wait_status)
                                ? "signal " + std::to_string(WTERMSIG(wait_status))
                                : "exit status " + std::to_string(WEXITSTATUS(wait_status));
    std::fprintf(stderr, "replay: FAILED %s (%zu bytes): %s\n", input.c_str(), bytes.size(),
                 how.c_str());
    failures.push_back(input.string());
  }
  std::fprintf(stderr, "replay: %zu of %zu inputs passed\n", inputs.size() - failures.size(),
               inputs.size());
  for (const std::string& failure : failures) {
    std::fprintf(stderr, "  failed: %s\n", failure.c_str());
  }
  return failures.empty() ? 0 : 1;
}
