#include "railyard/net/handshake.h"

#include <gtest/gtest.h>

#include <set>

namespace railyard::net {
namespace {

constexpr HandshakeProtocol kProto = {.magic = 0x54455354,
                                      .version = 3,
                                      .domain = "railyard-test",
                                      .acceptor = "the test acceptor",
                                      .context_bytes = 4};
constexpr HandshakeProtocol kOtherDomain = {.magic = 0x54455354,
                                            .version = 3,
                                            .domain = "railyard-other",
                                            .acceptor = "the other acceptor",
                                            .context_bytes = 4};

struct Outcome {
  Status connector;       // the connector's verdict on the acceptor
  bool accepted = false;  // the acceptor's verdict on the connector
};

// Runs the three messages between two in-memory ends.
Outcome RunHandshake(const HandshakeProtocol& cp, std::string_view csecret,
                     const HandshakeProtocol& ap, std::string_view asecret) {
  Handshake c(cp, csecret), a(ap, asecret);
  Outcome out;
  std::string hello = c.ConnectorHello("ctx1");
  Result<std::string> challenge = a.AcceptorChallenge(hello, "connector 10.0.0.2:4000");
  if (!challenge.ok()) {
    out.connector = challenge.status();
    return out;
  }
  Result<std::string> answer = c.ConnectorAnswer(*challenge, "acceptor 10.0.0.1:29500");
  out.connector = answer.status();
  if (answer.ok()) out.accepted = a.AcceptorCheck(*answer);
  return out;
}

TEST(Handshake, SameSecretProvesBothWays) {
  Outcome o = RunHandshake(kProto, "s3cret", kProto, "s3cret");
  EXPECT_TRUE(o.connector.ok()) << o.connector.ToString();
  EXPECT_TRUE(o.accepted);
}

TEST(Handshake, ConnectorRefusesAnAcceptorWithAnotherSecretNamingIt) {
  Outcome o = RunHandshake(kProto, "s3cret", kProto, "other");
  EXPECT_EQ(o.connector.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(o.connector.message(),
            "acceptor 10.0.0.1:29500 did not prove the job secret: wrong RAILYARD_JOB_SECRET, or "
            "not the test acceptor; nothing was sent to it");
  EXPECT_FALSE(o.accepted);
}

TEST(Handshake, ProofsDoNotCarryOverToAnotherProtocol) {
  Outcome o = RunHandshake(kProto, "s3cret", kOtherDomain, "s3cret");
  EXPECT_EQ(o.connector.code(), StatusCode::kPermissionDenied) << o.connector.ToString();
}

TEST(Handshake, AcceptorRefusesAForgedOrReplayedAnswer) {
  Handshake c(kProto, "s3cret"), a(kProto, "s3cret");
  std::string hello = c.ConnectorHello("ctx1");
  auto challenge = a.AcceptorChallenge(hello, "connector");
  ASSERT_TRUE(challenge.ok());
  auto answer = c.ConnectorAnswer(*challenge, "acceptor");
  ASSERT_TRUE(answer.ok());
  EXPECT_FALSE(a.AcceptorCheck(std::string(kAnswerBytes, '\0')));
  // The acceptor's own proof reflected back is not a connector's proof.
  EXPECT_FALSE(a.AcceptorCheck(challenge->substr(kHandshakeNonceBytes)));
  EXPECT_TRUE(a.AcceptorCheck(*answer));
  // The same hello and answer replayed to a second acceptor meet a fresh nonce.
  Handshake a2(kProto, "s3cret");
  ASSERT_TRUE(a2.AcceptorChallenge(hello, "replayer").ok());
  EXPECT_FALSE(a2.AcceptorCheck(*answer));
  // An acceptor that never sent a challenge accepts nothing.
  Handshake fresh(kProto, "s3cret");
  EXPECT_FALSE(fresh.AcceptorCheck(*answer));
}

TEST(Handshake, ContextIsBoundIntoTheProofs) {
  Handshake c(kProto, "s3cret"), a(kProto, "s3cret");
  std::string hello = c.ConnectorHello("ctx1");
  hello.replace(hello.size() - 4, 4, "ctx2");  // a man in the middle rewrites the context
  auto challenge = a.AcceptorChallenge(hello, "connector");
  ASSERT_TRUE(challenge.ok());
  EXPECT_EQ(a.context(), "ctx2");
  EXPECT_EQ(c.ConnectorAnswer(*challenge, "acceptor").status().code(),
            StatusCode::kPermissionDenied);
}

TEST(Handshake, WrongMagicOrVersionIsNamed) {
  Handshake c(kProto, "s"), a(kProto, "s");
  std::string hello = c.ConnectorHello("ctx1");
  std::string bad_magic = hello;
  bad_magic[0] = 'X';
  auto r = a.AcceptorChallenge(bad_magic, "connector 1.2.3.4:5");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("1.2.3.4:5"), std::string::npos) << r.status().message();
  std::string bad_version = hello;
  bad_version[7] = 9;
  r = a.AcceptorChallenge(bad_version, "connector 1.2.3.4:5");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("version 9"), std::string::npos) << r.status().message();
}

TEST(PendingHandshakes, FullSetDropsAnIdleConnectionBeforeOneThatSpoke) {
  PendingHandshakes p(std::chrono::seconds(60), 3);
  EXPECT_FALSE(p.Add(1).has_value());
  EXPECT_FALSE(p.Add(2).has_value());
  EXPECT_FALSE(p.Add(3).has_value());
  p.HelloReceived(1);  // the oldest is answering: keep it
  EXPECT_EQ(p.Add(4), std::optional<uint64_t>(2));
  EXPECT_EQ(p.size(), 3u);
  p.HelloReceived(3);
  p.HelloReceived(4);
  EXPECT_EQ(p.Add(5), std::optional<uint64_t>(1));  // everyone spoke: the oldest goes
  p.Remove(3);
  EXPECT_FALSE(p.Add(6).has_value());
  EXPECT_EQ(p.size(), 3u);
}

TEST(PendingHandshakes, ConnectionsExpireInOrder) {
  PendingHandshakes p(std::chrono::seconds(0), 8);
  EXPECT_TRUE(p.NextDeadline().IsNever());
  p.Add(7);
  p.Add(8);
  EXPECT_FALSE(p.NextDeadline().IsNever());
  EXPECT_EQ(p.TakeExpired(), (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(p.size(), 0u);
  PendingHandshakes later(std::chrono::seconds(600), 8);
  later.Add(1);
  EXPECT_TRUE(later.TakeExpired().empty());
}

}  // namespace
}  // namespace railyard::net
