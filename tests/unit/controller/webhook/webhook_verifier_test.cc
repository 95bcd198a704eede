// WebhookVerifier: the Standard Webhooks signature (checked against the specification's own
// example), freshness both ways, the replay cache, the size bound, several signatures.
#include "controller/webhook/webhook_verifier.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kBody[] = R"({"type":"agent.session.action_required","data":{"id":"sess_1"}})";

class WebhookVerifierTest : public ::testing::Test {
 protected:
  WebhookVerifierTest() : verifier_(Secret(kSecret), clock_) {}

  static WebhookSecret Secret(const std::string& text) {
    api::StatusOr<WebhookSecret> s = WebhookSecret::Parse(text);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  int64_t Now() const {
    return std::chrono::duration_cast<seconds>(clock_.Now().time_since_epoch()).count();
  }
  // Headers of a delivery signed with `secret` at `at` (Unix seconds).
  WebhookHeaders Signed(const std::string& id, int64_t at, const std::string& body = kBody,
                        const std::string& secret = kSecret) const {
    const std::string ts = std::to_string(at);
    return {id, ts, SignWebhook(Secret(secret), id, ts, body)};
  }

  testing::FakeClock clock_;
  WebhookVerifier verifier_;
};

TEST_F(WebhookVerifierTest, SignsLikeTheStandardWebhooksSpecificationExample) {
  // The example of github.com/standard-webhooks/standard-webhooks (spec and reference libs).
  EXPECT_EQ(SignWebhook(Secret(kSecret), "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
                        R"({"test": 2432232314})"),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST_F(WebhookVerifierTest, AcceptsAWellSignedFreshDelivery) {
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now()), kBody), std::nullopt);
  EXPECT_EQ(verifier_.Verify(Signed("msg_2", Now() - 299), kBody), std::nullopt);
  EXPECT_EQ(verifier_.Verify(Signed("msg_3", Now() + 299), kBody), std::nullopt);
}

TEST_F(WebhookVerifierTest, RefusesForgedSignatures) {
  const std::string other = "whsec_" + std::string("c2VjcmV0LW9mLXNvbWVvbmUtZWxzZQ==");
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now(), kBody, other), kBody),
            WebhookRejection::kBadSignature);
  // Each signed part matters: body, id and timestamp.
  WebhookHeaders h = Signed("msg_1", Now());
  EXPECT_EQ(verifier_.Verify(h, std::string(kBody) + " "), WebhookRejection::kBadSignature);
  WebhookHeaders id = h;
  id.id = "msg_2";
  EXPECT_EQ(verifier_.Verify(id, kBody), WebhookRejection::kBadSignature);
  WebhookHeaders ts = h;
  ts.timestamp = std::to_string(Now() - 1);
  EXPECT_EQ(verifier_.Verify(ts, kBody), WebhookRejection::kBadSignature);
  WebhookHeaders garbage = h;
  garbage.signature = "v1,not-a-signature";
  EXPECT_EQ(verifier_.Verify(garbage, kBody), WebhookRejection::kBadSignature);
  WebhookHeaders bare = h;
  bare.signature = h.signature.substr(3);  // the MAC without its "v1," version
  EXPECT_EQ(verifier_.Verify(bare, kBody), WebhookRejection::kBadSignature);
}

TEST_F(WebhookVerifierTest, RefusesStaleAndFutureTimestamps) {
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now() - 301), kBody), WebhookRejection::kStale);
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now() - 3600), kBody), WebhookRejection::kStale);
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now() + 301), kBody), WebhookRejection::kFuture);
  // A delivery goes stale while it waits.
  const WebhookHeaders h = Signed("msg_1", Now());
  clock_.Advance(minutes(5) + seconds(1));
  EXPECT_EQ(verifier_.Verify(h, kBody), WebhookRejection::kStale);
}

TEST_F(WebhookVerifierTest, RefusesTimestampsThatAreNotDecimalSeconds) {
  for (const std::string ts : {"abc", "-5", "12x", "1.5", " 1"}) {
    WebhookHeaders h{"msg_1", ts, SignWebhook(Secret(kSecret), "msg_1", ts, kBody)};
    EXPECT_EQ(verifier_.Verify(h, kBody), WebhookRejection::kBadTimestamp) << ts;
  }
}

TEST_F(WebhookVerifierTest, RefusesMissingHeaders) {
  const WebhookHeaders h = Signed("msg_1", Now());
  WebhookHeaders no_id = h;
  no_id.id.clear();
  WebhookHeaders no_ts = h;
  no_ts.timestamp.clear();
  WebhookHeaders no_sig = h;
  no_sig.signature.clear();
  for (const WebhookHeaders& missing : {no_id, no_ts, no_sig}) {
    EXPECT_EQ(verifier_.Verify(missing, kBody), WebhookRejection::kMissingHeader);
  }
  WebhookHeaders huge = h;
  huge.signature += " v1," + std::string(5000, 'A');
  EXPECT_EQ(verifier_.Verify(huge, kBody), WebhookRejection::kMissingHeader);
}

TEST_F(WebhookVerifierTest, RefusesABodyOverOneMebibyte) {
  const std::string at_limit(size_t{1} << 20, 'x');
  const std::string over = at_limit + "x";
  EXPECT_EQ(verifier_.Verify(Signed("msg_1", Now(), at_limit), at_limit), std::nullopt);
  EXPECT_EQ(verifier_.Verify(Signed("msg_2", Now(), over), over), WebhookRejection::kTooLarge);
}

TEST_F(WebhookVerifierTest, AcceptsAnyOfSeveralSignaturesAndSkipsOtherVersions) {
  WebhookHeaders h = Signed("msg_1", Now());
  const std::string good = h.signature;
  const std::string rotated_out = Signed("msg_1", Now(), kBody, "old-raw-secret").signature;
  h.signature = rotated_out + " " + good;
  EXPECT_EQ(verifier_.Verify(h, kBody), std::nullopt);
  h.signature = good + "  " + rotated_out;  // order and repeated spaces do not matter
  EXPECT_EQ(verifier_.Verify(h, kBody), std::nullopt);
  h.signature = "v1a," + good.substr(3) + " " + good;  // an asymmetric (v1a) entry is skipped
  EXPECT_EQ(verifier_.Verify(h, kBody), std::nullopt);
  h.signature = "v1a," + good.substr(3) + " " + rotated_out;
  EXPECT_EQ(verifier_.Verify(h, kBody), WebhookRejection::kBadSignature);
}

TEST_F(WebhookVerifierTest, RefusesAReplayedIdUntilItsWindowHasPassed) {
  EXPECT_EQ(verifier_.Reserve("msg_1"), std::nullopt);
  EXPECT_EQ(verifier_.Reserve("msg_1"), WebhookRejection::kReplayed);
  EXPECT_EQ(verifier_.Reserve("msg_2"), std::nullopt);
  clock_.Advance(minutes(9));
  EXPECT_EQ(verifier_.Reserve("msg_1"), WebhookRejection::kReplayed);
  // 2 × tolerance after acceptance no signed (id, timestamp) of it can pass Verify any more.
  clock_.Advance(minutes(1));
  EXPECT_EQ(verifier_.Reserve("msg_1"), std::nullopt);
}

TEST_F(WebhookVerifierTest, AReleasedIdCanBeAcceptedAgain) {
  ASSERT_EQ(verifier_.Reserve("msg_1"), std::nullopt);
  verifier_.Release("msg_1");
  EXPECT_EQ(verifier_.Reserve("msg_1"), std::nullopt);
  EXPECT_EQ(verifier_.Reserve("msg_1"), WebhookRejection::kReplayed);
  verifier_.Release("msg_unknown");  // no-op
}

TEST_F(WebhookVerifierTest, AFullReplayCacheRefusesRatherThanForgets) {
  WebhookVerifierOptions options;
  options.replay_capacity = 2;
  WebhookVerifier small(Secret(kSecret), clock_, options);
  ASSERT_EQ(small.Reserve("a"), std::nullopt);
  ASSERT_EQ(small.Reserve("b"), std::nullopt);
  EXPECT_EQ(small.Reserve("c"), WebhookRejection::kReplayCacheFull);
  EXPECT_EQ(small.Reserve("a"), WebhookRejection::kReplayed);
  clock_.Advance(minutes(10));
  EXPECT_EQ(small.Reserve("c"), std::nullopt);
}

TEST(WebhookSecretTest, ParsesWhsecBase64AndRawSecrets) {
  api::StatusOr<WebhookSecret> s = WebhookSecret::Parse("whsec_aGVsbG8=");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->key(), "hello");
  api::StatusOr<WebhookSecret> raw = WebhookSecret::Parse("plain-secret");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->key(), "plain-secret");
  for (const char* bad : {"", "whsec_", "whsec_not base64!", "whsec_abc"}) {
    api::StatusOr<WebhookSecret> b = WebhookSecret::Parse(bad);
    EXPECT_EQ(b.status().code(), api::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(b.status().message().find("base64!"), std::string::npos);  // never the value
  }
}

TEST(WebhookRejectionTest, MapsToClientErrors) {
  EXPECT_EQ(HttpStatusOf(WebhookRejection::kBadSignature), 401);
  EXPECT_EQ(HttpStatusOf(WebhookRejection::kStale), 400);
  EXPECT_EQ(HttpStatusOf(WebhookRejection::kReplayed), 409);
  EXPECT_EQ(HttpStatusOf(WebhookRejection::kTooLarge), 413);
  EXPECT_EQ(Label(WebhookRejection::kFuture), "future");
}

}  // namespace
}  // namespace sbx::controller
