// A training-like job for tessel's real nodes: it runs iterations (a short
// sleep each), checkpoints every N iterations and when told to stop
// (SIGTERM), resumes from its checkpoint when TESSEL_RESUME=1, and reports
// progress to its agent. The end-to-end tests run it; it is also the
// smallest honest picture of what a job must do to be preemptible.
//
//   train --iterations 100 [--sleep-ms 20] [--checkpoint-every 10] [--checkpoint FILE]
//         [--stop-ms 0]   (time a stop takes: a slow checkpoint on SIGTERM)
//
// Rank 0 owns the checkpoint (default: checkpoint.txt in the working
// directory). Each rank holds a lock next to it while it runs, so a second
// live copy of the same rank is caught: it prints DUPLICATE and exits 3.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include <tessel/progress.hpp>

namespace {

volatile sig_atomic_t stop_requested = 0;
extern "C" void on_sigterm(int) { stop_requested = 1; }

double wall_time() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

long read_checkpoint(const std::string& path) {
  std::ifstream in(path);
  long iteration = 0;
  return (in >> iteration) ? iteration : 0;
}

// Write then rename: a crash mid-write leaves the previous checkpoint whole.
void write_checkpoint(const std::string& path, long iteration) {
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary) << iteration << "\n";
  std::rename(temporary.c_str(), path.c_str());
}

int usage(const char* why) {
  std::fprintf(stderr,
               "train: %s\nusage: train --iterations N [--sleep-ms MS] [--checkpoint-every N] [--checkpoint FILE] "
               "[--stop-ms MS]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 0, sleep_ms = 20, every = 10, stop_ms = 0;
  std::string checkpoint = "checkpoint.txt";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(("missing value for " + arg).c_str());
    const char* value = argv[++i];
    if (arg == "--iterations") iterations = std::atol(value);
    else if (arg == "--sleep-ms") sleep_ms = std::atol(value);
    else if (arg == "--checkpoint-every") every = std::atol(value);
    else if (arg == "--checkpoint") checkpoint = value;
    else if (arg == "--stop-ms") stop_ms = std::atol(value);
    else return usage(("unknown option " + arg).c_str());
  }
  if (iterations < 1 || sleep_ms < 0 || every < 1 || stop_ms < 0) return usage("bad numbers");

  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  const bool resume = std::getenv("TESSEL_RESUME") && std::string(std::getenv("TESSEL_RESUME")) == "1";

  const std::string lock_path = checkpoint + ".rank" + std::to_string(rank) + ".lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    std::printf("train: DUPLICATE: another live copy of rank %d holds %s\n", rank, lock_path.c_str());
    return 3;
  }

  struct sigaction action{};
  action.sa_handler = on_sigterm;
  sigaction(SIGTERM, &action, nullptr);

  long done = resume ? read_checkpoint(checkpoint) : 0;
  std::printf("train: start pid %d rank %d at %.6f, %s iteration %ld of %ld\n", static_cast<int>(::getpid()), rank,
              wall_time(), resume ? "resuming from" : "starting at", done, iterations);
  std::fflush(stdout);
  if (rank == 0) tessel::report_progress(done, iterations);

  while (done < iterations) {
    if (stop_requested) {
      std::this_thread::sleep_for(std::chrono::milliseconds(stop_ms));
      if (rank == 0) write_checkpoint(checkpoint, done);
      std::printf("train: SIGTERM at iteration %ld; checkpointed %ld; exiting at %.6f\n", done, done, wall_time());
      return 143;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    ++done;
    std::printf("train: iteration %ld\n", done);
    if (rank == 0) {
      if (done % every == 0) {
        write_checkpoint(checkpoint, done);
        std::printf("train: checkpoint %ld\n", done);
      }
      tessel::report_progress(done, iterations);
    }
    std::fflush(stdout);
  }
  if (rank == 0) write_checkpoint(checkpoint, done);
  std::printf("train: done %ld of %ld at %.6f\n", done, iterations, wall_time());
  return 0;
}
