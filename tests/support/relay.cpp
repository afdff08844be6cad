#include <utility>  // before Asio (asio issue #944)

#include "relay.hpp"

#include <fcntl.h>

#include <array>
#include <chrono>
#include <functional>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace tessel::test {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// One relayed connection: socket 0 is the client's, socket 1 the target's;
// buffer i holds what was read from socket i and is being written to the other.
struct Link {
  Link(tcp::socket client, asio::io_context& io) : sockets{std::move(client), tcp::socket(io)} {}
  std::array<tcp::socket, 2> sockets;
  std::array<std::array<char, 16 * 1024>, 2> buffers;
  bool cut = false;   // open when a black hole began
  bool dead = false;  // cut, and left so by heal_new_only()

  // Either side failing or closing ends both, as a reset would. Shut down
  // first: a child the test spawned meanwhile may hold a copy of a socket,
  // which would keep the connection open past close().
  void close() {
    boost::system::error_code ignored;
    for (tcp::socket& socket : sockets) {
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    }
  }
};

// Not inherited by the processes the test spawns later (agents, clients).
template <typename Socket>
void keep_from_children(Socket& socket) {
  ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
}

}  // namespace

struct TcpRelay::State {
  asio::io_context io;
  // Keeps the thread running until the destructor stops it, whatever waits.
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  tcp::endpoint target;
  bool black_holed = false;
  int accepted = 0;
  std::chrono::system_clock::time_point last_to_client;
  // What waits for heal(): reads to forward, connections to complete.
  std::vector<std::pair<std::shared_ptr<Link>, std::function<void()>>> parked;
  std::vector<std::weak_ptr<Link>> links;
  // Cut connections that heal_new_only() left dead: held open, never read.
  std::vector<std::shared_ptr<Link>> dead;
  std::thread thread;

  // Runs `next`, a step of `link`, now, or at heal() while black-holed.
  void gate(const std::shared_ptr<Link>& link, std::function<void()> next) {
    if (link->dead) return;
    if (black_holed) parked.emplace_back(link, std::move(next));
    else next();
  }

  void black_hole() {
    black_holed = true;
    for (const auto& weak : links)
      if (auto link = weak.lock()) link->cut = true;
  }

  void heal(bool revive_cut) {
    black_holed = false;
    for (const auto& weak : links)
      if (auto link = weak.lock()) {
        if (link->cut && !revive_cut && !link->dead) {
          link->dead = true;
          dead.push_back(link);
        }
        link->cut = false;
      }
    for (auto& [link, next] : std::exchange(parked, {}))
      if (!link->dead) next();
  }

  void accept() {
    acceptor.async_accept([this](boost::system::error_code error, tcp::socket socket) {
      if (error) return;  // the acceptor closed
      ++accepted;
      keep_from_children(socket);
      auto link = std::make_shared<Link>(std::move(socket), io);
      links.push_back(link);
      gate(link, [this, link] {
        link->sockets[1].async_connect(target, [this, link](boost::system::error_code error) {
          if (error) return link->close();
          keep_from_children(link->sockets[1]);
          pump(link, 0);
          pump(link, 1);
        });
      });
      accept();
    });
  }

  // Forwards from socket `from` to the other, one read at a time; a read
  // that completes while black-holed is held, unforwarded, and no more are
  // made, so the rest waits in the kernel.
  void pump(const std::shared_ptr<Link>& link, int from) {
    link->sockets[from].async_read_some(
        asio::buffer(link->buffers[from]), [this, link, from](boost::system::error_code error, std::size_t bytes) {
          gate(link, [this, link, from, error, bytes] {
            if (error) return link->close();
            asio::async_write(link->sockets[1 - from], asio::buffer(link->buffers[from].data(), bytes),
                              [this, link, from](boost::system::error_code error, std::size_t) {
                                if (error) return link->close();
                                if (from == 1) last_to_client = std::chrono::system_clock::now();
                                pump(link, from);
                              });
          });
        });
  }

  // Runs `change` on the relay's thread and waits for it.
  void on_thread(const std::function<void()>& change) {
    std::promise<void> done;
    asio::post(io, [&] {
      change();
      done.set_value();
    });
    done.get_future().wait();
  }
};

TcpRelay::TcpRelay(const std::string& target) : state_(std::make_unique<State>()) {
  const auto colon = target.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("relay target '" + target + "' is not HOST:PORT");
  state_->target = tcp::endpoint(asio::ip::make_address(target.substr(0, colon)),
                                 static_cast<unsigned short>(std::stoi(target.substr(colon + 1))));
  const tcp::endpoint any(asio::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(any.protocol());
  state_->acceptor.bind(any);
  state_->acceptor.listen();
  keep_from_children(state_->acceptor);
  state_->accept();
  state_->thread = std::thread([state = state_.get()] { state->io.run(); });
}

TcpRelay::~TcpRelay() {
  state_->on_thread([state = state_.get()] {
    boost::system::error_code ignored;
    state->acceptor.close(ignored);
    state->parked.clear();
    state->dead.clear();
    for (const auto& weak : state->links)
      if (auto link = weak.lock()) link->close();
  });
  state_->io.stop();
  state_->thread.join();
}

std::string TcpRelay::address() const {
  return "127.0.0.1:" + std::to_string(state_->acceptor.local_endpoint().port());
}

void TcpRelay::black_hole() {
  state_->on_thread([state = state_.get()] { state->black_hole(); });
}

void TcpRelay::heal() {
  state_->on_thread([state = state_.get()] { state->heal(true); });
}

void TcpRelay::heal_new_only() {
  state_->on_thread([state = state_.get()] { state->heal(false); });
}

double TcpRelay::last_to_client() const {
  double seconds = 0;
  state_->on_thread(
      [&] { seconds = std::chrono::duration<double>(state_->last_to_client.time_since_epoch()).count(); });
  return seconds;
}

int TcpRelay::accepted() const {
  int count = 0;
  state_->on_thread([&] { count = state_->accepted; });
  return count;
}

}  // namespace tessel::test
