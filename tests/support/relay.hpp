// A loopback TCP relay for fault tests: each connection made to it is
// forwarded to a target, and the relay can black-hole, as a network
// partition does: it stops forwarding both ways, refuses nothing and closes
// nothing. Bytes sent meanwhile wait in the kernel's socket buffers, as
// unacknowledged segments wait in a sender's retransmission queue; a
// connection opened meanwhile is completed by the kernel but goes nowhere.
// heal() forwards what waited, in order, and connects the connections that
// waited, so a peer that closed meanwhile is seen to have closed only then.
//
// It runs its own thread; every call returns once the change is in effect.
#pragma once

#include <memory>
#include <string>

namespace tessel::test {

class TcpRelay {
 public:
  // Forwards to `target` (HOST:PORT), listening on 127.0.0.1 at any free port.
  explicit TcpRelay(const std::string& target);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Where to connect: 127.0.0.1:PORT.
  std::string address() const;
  void black_hole();
  void heal();
  // Heals for the connections made since the black hole began, and new
  // ones; those it cut stay dead for good, open and silent, as behind a
  // firewall or NAT that lost their state: their peers hear of it only
  // from their own timeouts.
  void heal_new_only();
  // Connections accepted so far, black-holed ones included.
  int accepted() const;
  // When bytes were last handed to a connecting client (Unix seconds; 0: never).
  double last_to_client() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tessel::test
