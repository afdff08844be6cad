// The pieces of the real-cluster protocol that need no sockets: the frame
// decoder, message checking, the HMAC handshake, secrets, job requests and
// progress lines.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <string>

#include "agent.hpp"
#include "auth.hpp"
#include "engine/errors.hpp"
#include "frame.hpp"
#include "job_process.hpp"
#include "job_request.hpp"
#include "protocol.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::cluster;
using namespace tessel::test;

namespace {

std::string header(std::uint8_t version, std::uint32_t length) {
  std::string h = "ts";
  h += static_cast<char>(version);
  for (int shift = 24; shift >= 0; shift -= 8) h += static_cast<char>((length >> shift) & 0xff);
  return h;
}

std::vector<std::string> drain(FrameDecoder& decoder) {
  std::vector<std::string> out;
  while (auto frame = decoder.next()) out.push_back(*frame);
  return out;
}

}  // namespace

TEST_CASE("frames come out whole however the bytes are split") {
  const std::string stream = encode_frame(R"({"type":"a"})") + encode_frame("") + encode_frame(std::string(300, 'x'));
  for (std::size_t chunk = 1; chunk <= stream.size(); chunk += (chunk < 20 ? 1 : 37)) {
    FrameDecoder decoder(1024);
    std::vector<std::string> frames;
    for (std::size_t at = 0; at < stream.size(); at += chunk) {
      decoder.feed(std::string_view(stream).substr(at, chunk));
      for (auto& f : drain(decoder)) frames.push_back(f);
    }
    REQUIRE(frames.size() == 3);
    CHECK(frames[0] == R"({"type":"a"})");
    CHECK(frames[1].empty());
    CHECK(frames[2] == std::string(300, 'x'));
    CHECK(decoder.buffered() == 0);
  }
}

TEST_CASE("the decoder refuses bad magic, unknown versions and oversized frames, for good") {
  {
    FrameDecoder decoder(100);
    decoder.feed("GET / HTTP/1.1\r\n");
    CHECK_THROWS_WITH_AS(decoder.next(), "not a tessel frame (bad magic)", FrameError);
    decoder.feed(encode_frame("{}"));
    CHECK_THROWS_AS(decoder.next(), FrameError);  // broken stays broken
  }
  {
    FrameDecoder decoder(100);
    decoder.feed("t");  // one byte is enough to see it is wrong... or right
    CHECK_FALSE(decoder.next());
    decoder.feed("x");
    CHECK_THROWS_WITH_AS(decoder.next(), "not a tessel frame (bad magic)", FrameError);
  }
  {
    FrameDecoder decoder(100);
    decoder.feed(header(9, 2));
    CHECK_THROWS_WITH_AS(decoder.next(), "protocol version 9, expected 1", FrameError);
  }
  {
    FrameDecoder decoder(100);
    decoder.feed(header(kProtocolVersion, 101));  // refused before the payload arrives
    CHECK_THROWS_WITH_AS(decoder.next(), "frame of 101 bytes exceeds the 100-byte limit", FrameError);
  }
  {
    FrameDecoder decoder(100);
    decoder.feed(header(kProtocolVersion, 100) + std::string(100, 'y'));
    CHECK(decoder.next() == std::string(100, 'y'));  // exactly the limit is fine
    decoder.set_max_payload(10);
    decoder.feed(header(kProtocolVersion, 11));
    CHECK_THROWS_AS(decoder.next(), FrameError);
  }
  CHECK_THROWS_AS(encode_frame(std::string(kMaxFrameBytes + 1, 'z')), FrameError);
}

TEST_CASE("messages are checked field by field") {
  CHECK_THROWS_WITH_AS(Message::parse("{not json"), "message is not valid JSON", ProtocolError);
  CHECK_THROWS_WITH_AS(Message::parse("[1,2]"), "message is not a JSON object", ProtocolError);
  CHECK_THROWS_WITH_AS(Message::parse(R"({"type":3})"), "message has no string 'type'", ProtocolError);
  const Message m = Message::parse(R"({"type":"launch","job":-1,"big":18446744073709551615,"name":"x","list":[]})");
  CHECK(m.type() == "launch");
  CHECK_THROWS_WITH_AS(m.integer("job", 0), "'job' in 'launch' message must be in 0..9223372036854775807", ProtocolError);
  CHECK_THROWS_AS(m.integer("big"), ProtocolError);
  CHECK_THROWS_WITH_AS(m.integer("name"), "'name' in 'launch' message must be an integer", ProtocolError);
  CHECK_THROWS_WITH_AS(m.text("missing"), "'launch' message lacks 'missing'", ProtocolError);
  CHECK(m.array("list").empty());
  CHECK_THROWS_AS(m.object("list"), ProtocolError);
}

TEST_CASE("the handshake admits a peer with the secret, both ways, and refuses one without") {
  const Secret secret("correct horse battery staple");
  const Secret other("incorrect horse battery staple");

  ServerHandshake server(secret);
  ClientHandshake agent(secret, Role::agent);
  const Message hello = Message(agent.hello(Message(server.challenge())));
  CHECK(hello.body().dump().find("correct horse") == std::string::npos);  // the secret never travels
  std::string why;
  CHECK(server.check(hello, why) == Role::agent);
  CHECK_NOTHROW(agent.check(Message(server.welcome())));

  ServerHandshake server2(secret);
  ClientHandshake intruder(other, Role::client);
  CHECK_FALSE(server2.check(Message(intruder.hello(Message(server2.challenge()))), why).has_value());
  CHECK(why == "wrong secret");

  // A recorded hello does not open another session: the challenge differs.
  ServerHandshake server3(secret);
  (void)server3.challenge();
  CHECK_FALSE(server3.check(hello, why).has_value());

  // A daemon without the secret cannot pass for the real one.
  ServerHandshake impostor(other);
  ClientHandshake client(secret, Role::client);
  const Message hello2 = Message(client.hello(Message(impostor.challenge())));
  (void)impostor.check(hello2, why);
  CHECK_THROWS_WITH_AS(client.check(Message(impostor.welcome())), "the scheduler could not prove it knows the secret",
                       ProtocolError);
  CHECK_THROWS_WITH_AS(client.check(Message(message("refused", {{"reason", "wrong secret"}}))),
                       "the scheduler refused us: wrong secret", ProtocolError);

  // Malformed hellos are protocol errors, not refusals.
  ServerHandshake server4(secret);
  CHECK_THROWS_AS(server4.check(Message(message("hello", {{"role", "root"}, {"nonce", "00"}, {"proof", ""}})), why),
                  ProtocolError);
  CHECK_THROWS_AS(server4.check(Message(message("hello", {{"role", "agent"}, {"nonce", "zz"}, {"proof", ""}})), why),
                  ProtocolError);
}

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2") {
  CHECK(Secret("Jefe").mac("what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("secret files must be private and long enough") {
  TempDir dir;
  const auto good = dir.write("good", "0123456789abcdef0123\n");
  ::chmod(good.c_str(), 0600);
  CHECK_NOTHROW(Secret::from_file(good));
  const auto open = dir.write("open", "0123456789abcdef0123\n");
  ::chmod(open.c_str(), 0644);
  CHECK_THROWS_WITH_AS(Secret::from_file(open),
                       (open.string() + ": the secret file is readable by others (mode 0644); chmod 600 it").c_str(),
                       UserError);
  const auto short_one = dir.write("short", "tiny\n");
  ::chmod(short_one.c_str(), 0600);
  CHECK_THROWS_AS(Secret::from_file(short_one), UserError);
  CHECK_THROWS_AS(Secret::from_file(dir.path() / "missing"), UserError);
}

TEST_CASE("job files are read with located errors, and checked again from the wire") {
  TempDir dir;
  const auto file = dir.write("job.toml", R"(name = "resnet"
command = ["train", "--fast"]
gpus = 2
iterations = 100
env = { NCCL_DEBUG = "INFO" }
workdir = "runs"
)");
  const JobRequest request = read_job_request(file, {"gpus=3"}, "/somewhere");
  CHECK(request.command == std::vector<std::string>{"train", "--fast"});
  CHECK(request.gpus == 3);
  CHECK(request.iterations == 100);
  CHECK(request.workdir == (dir.path() / "runs").string());
  CHECK(request.env.at("NCCL_DEBUG") == "INFO");
  CHECK(JobRequest::from_json(request.to_json()).to_json() == request.to_json());
  CHECK(request.spec(5).total_work == 100);

  const JobRequest shell = read_job_request(std::nullopt, {"command=\"echo hi\""}, "/work");
  CHECK(shell.command == std::vector<std::string>{"/bin/sh", "-c", "echo hi"});
  CHECK(shell.workdir == "/work");
  CHECK(std::isinf(shell.spec(0).total_work));  // ends by exit: no known length

  const auto bad = dir.write("bad.toml", "command = [\"x\"]\ngpus = 0\nmemory = 3\n");
  try {
    read_job_request(bad, {}, "/w");
    FAIL("no error");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].str().starts_with(bad.string() + ":2:8: 'gpus'"));
    CHECK(e.diagnostics()[1].str().starts_with(bad.string() + ":3:1: unknown key 'memory'"));
  }
  CHECK_THROWS_WITH_AS(read_job_request(std::nullopt, {"command=[\"x\"]", "env.RANK=\"3\""}, "/w"),
                       "job: env may not set RANK: tessel sets it for every job", UserError);
  CHECK_THROWS_WITH_AS(read_job_request(std::nullopt, {}, "/w"),
                       "command line:1:1: the job needs a command (command = [\"prog\", \"arg\"] or a shell string)", ConfigError);

  json wire = request.to_json();
  wire["gpus"] = 5;
  wire["max_gpus"] = 4;
  wire["min_gpus"] = 1;
  CHECK_THROWS_WITH_AS(JobRequest::from_json(wire), "an elastic job needs 1 <= min_gpus <= gpus <= max_gpus",
                       ProtocolError);
  wire = request.to_json();
  wire["workdir"] = "relative";
  CHECK_THROWS_AS(JobRequest::from_json(wire), ProtocolError);
}

TEST_CASE("progress lines and GPU names") {
  CHECK(parse_progress_line("iteration 120 of 1000")->iteration == 120);
  CHECK(parse_progress_line("iteration 120 of 1000")->total == 1000);
  CHECK(parse_progress_line("iteration 7")->total == 0);
  CHECK_FALSE(parse_progress_line("epoch 3"));
  CHECK_FALSE(parse_progress_line("iteration -1 of 10"));
  CHECK_FALSE(parse_progress_line("iteration 5 of"));
  CHECK_FALSE(parse_progress_line("iteration 5 of 10 extra"));
  CHECK(gpu_type_from_name("Tesla V100-SXM2-16GB") == "v100");
  CHECK(gpu_type_from_name("NVIDIA A100-SXM4-80GB") == "a100");
  CHECK(gpu_type_from_name("NVIDIA GeForce RTX 3090") == "rtx3090");
}
