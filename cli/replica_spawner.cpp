#include "replica_spawner.h"

#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "router/health_checker.h"

namespace trellis::cli {
namespace {

constexpr auto kStopGrace = std::chrono::seconds(10);
constexpr auto kPollInterval = std::chrono::milliseconds(100);

// A loopback port nobody listens on now (the kernel's pick). Another process could take it
// before the replica binds; the replica then fails to start and wait_ready() says so.
Result<int> free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Error{"cannot open a socket to find a free port"};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(fd);
  if (!ok) return Error{"cannot find a free loopback port"};
  return static_cast<int>(ntohs(address.sin_port));
}

// fork + exec of this binary. Between the two only async-signal-safe calls: the argument vector
// is built before the fork.
Result<pid_t> spawn_serve(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Error{"cannot start a replica: fork failed"};
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // the router died: so does its replica
    if (getppid() != parent) _exit(1);  // it died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

Result<std::unique_ptr<ReplicaSpawner>> ReplicaSpawner::start(
    int n_replicas, const std::vector<std::string>& serve_args) {
  std::unique_ptr<ReplicaSpawner> spawner(new ReplicaSpawner());
  for (int i = 0; i < n_replicas; ++i) {
    Result<int> port = free_loopback_port();
    if (!port.ok()) return port.error();
    std::vector<std::string> args = {"trellis", "serve", "--host", "127.0.0.1", "--port",
                                     std::to_string(*port)};
    args.insert(args.end(), serve_args.begin(), serve_args.end());
    Result<pid_t> pid = spawn_serve(args);
    if (!pid.ok()) return pid.error();
    spawner->pids_.push_back(*pid);
    spawner->addresses_.push_back(ReplicaAddress{"127.0.0.1", *port});
  }
  return spawner;
}

ReplicaSpawner::~ReplicaSpawner() {
  stop_all();
}

Status ReplicaSpawner::wait_ready(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const UpstreamTimeouts quick{std::chrono::milliseconds(500), std::chrono::milliseconds(1000)};
  for (size_t i = 0; i < pids_.size(); ++i) {
    while (!replica_healthy(addresses_[i], quick)) {
      int status = 0;
      if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        pids_[i] = -1;
        return Error{"replica " + std::to_string(i) + " (" + addresses_[i].url() +
                     ") exited before it was ready (status " +
                     std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
                     ")"};
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return Error{"replica " + std::to_string(i) + " (" + addresses_[i].url() +
                     ") was not ready in time"};
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }
  return {};
}

void ReplicaSpawner::stop_all() {
  for (pid_t pid : pids_)
    if (pid > 0) kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  for (pid_t& pid : pids_) {
    while (pid > 0) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(kPollInterval);
      }
    }
  }
}

}  // namespace trellis::cli
