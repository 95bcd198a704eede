// WebhookReceiver over a real SqliteStore (":memory:"): which deliveries wake which worker, and
// that every refused one changes nothing.
#include "controller/webhook/webhook_receiver.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using std::chrono::seconds;

constexpr char kSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

class RecordingEnqueuer final : public Enqueuer {
 public:
  void Enqueue(const api::ObjectKey& key) override {
    std::lock_guard lock(mu_);
    keys_.push_back(key);
  }
  void EnqueueDependents(const api::ObjectKey&) override {}
  std::vector<api::ObjectKey> keys() const {
    std::lock_guard lock(mu_);
    return keys_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<api::ObjectKey> keys_;
};

class WebhookReceiverTest : public ::testing::Test {
 protected:
  WebhookReceiverTest()
      : store_(*SqliteStore::Open(":memory:", SqliteStore::Options{})),
        verifier_(*WebhookSecret::Parse(kSecret), clock_),
        receiver_(verifier_, *store_, hints_) {}

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Worker("fixer", "sess_owned")); }
  void TearDown() override { StopLeading(); }

  void Worker(const std::string& name, const std::string& session_id) {
    api::Object w = api::MakeObject(api::Kind::kAgentWorker, name);
    w.agent_worker_spec().sandbox_ref = "box";
    w.agent_worker_spec().agent.model = "gpt-5";
    auto applied = store_->Apply({w}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
    api::Object stored = applied->at(0).object;
    stored.agent_worker_status().session_id = session_id;
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
  }
  // The Manager runs the receiver as a Source while this sbxd leads.
  void Lead() {
    leading_ = std::jthread([this](std::stop_token stop) { receiver_.Run(queue_, stop); });
    ASSERT_TRUE(testing::PollUntil([this] { return receiver_.running(); },
                                   testing::In(std::chrono::seconds(5))))
        << "Run did not start";
  }
  void StopLeading() {
    leading_ = {};  // stops and joins
  }

  static WebhookRequest Request(const std::string& method, const std::string& path,
                                const std::string& body) {
    WebhookRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    return r;
  }
  int64_t Now() const {
    return std::chrono::duration_cast<seconds>(clock_.Now().time_since_epoch()).count();
  }
  WebhookRequest Delivery(const std::string& id, const std::string& body, int64_t at = -1,
                          const std::string& secret = kSecret) const {
    WebhookRequest r = Request("POST", "/webhooks/openai", body);
    const std::string ts = std::to_string(at < 0 ? Now() : at);
    r.headers["webhook-id"] = id;
    r.headers["webhook-timestamp"] = ts;
    r.headers["webhook-signature"] = SignWebhook(*WebhookSecret::Parse(secret), id, ts, body);
    return r;
  }
  static std::string ActionRequired(const std::string& session,
                                    const std::string& action = "environment_connection") {
    return R"({"id":"evt_1","object":"event","created_at":1,"type":"agent.session.action_required","data":{"id":")" +
           session + R"(","required_action":{"type":")" + action + R"("}}})";
  }
  int64_t CountOf(const std::string& result, const std::string& reason) const {
    const auto counts = receiver_.Counts();
    auto it = counts.find({result, reason});
    return it == counts.end() ? 0 : it->second;
  }
  static api::ObjectKey Key(const std::string& name) {
    return {api::Kind::kAgentWorker, "default", name};
  }

  testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  WebhookVerifier verifier_;
  WakeHints hints_;
  WebhookReceiver receiver_;
  RecordingEnqueuer queue_;
  std::jthread leading_;
};

TEST_F(WebhookReceiverTest, EnqueuesAndWakesTheWorkerThatOwnsTheSession) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  ASSERT_NO_FATAL_FAILURE(Worker("other", "sess_other"));
  WebhookResponse r = receiver_.Handle(Delivery("msg_1", ActionRequired("sess_owned")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(queue_.keys(), std::vector<api::ObjectKey>{Key("fixer")});
  EXPECT_TRUE(hints_.Take(Key("fixer")));
  EXPECT_FALSE(hints_.Take(Key("other")));
  EXPECT_EQ(CountOf("accepted", "enqueued"), 1);
}

// Replicas splitting workspaces (#25): the hint is also posted to the store, where the replica
// that holds the worker's workspace sees it (a wake-hint change); without share_hints, nothing
// is written.
TEST_F(WebhookReceiverTest, WithSharedHintsTheHintIsPostedToTheStoreForTheHoldingReplica) {
  const int64_t before = *store_->CurrentRevision();
  WebhookReceiver sharing(verifier_, *store_, hints_, {.share_hints = true});
  std::jthread run([&](std::stop_token stop) { sharing.Run(queue_, stop); });
  ASSERT_TRUE(
      testing::PollUntil([&] { return sharing.running(); }, testing::In(std::chrono::seconds(5))));
  EXPECT_EQ(sharing.Handle(Delivery("msg_1", ActionRequired("sess_owned"))).status, 200);
  auto changes = store_->WatchSince(before);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ(changes->at(0).key, Key("fixer"));
  EXPECT_TRUE(changes->at(0).wake_hint);
  EXPECT_EQ(queue_.keys(), std::vector<api::ObjectKey>{Key("fixer")});  // and locally, at once
  run = {};

  ASSERT_NO_FATAL_FAILURE(Lead());  // receiver_: share_hints off
  const int64_t after = *store_->CurrentRevision();
  EXPECT_EQ(receiver_.Handle(Delivery("msg_2", ActionRequired("sess_owned"))).status, 200);
  EXPECT_EQ(*store_->CurrentRevision(), after);
}

TEST_F(WebhookReceiverTest, AFailedSessionWakesItsWorkerToo) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  const std::string failed =
      R"({"id":"evt_2","object":"event","created_at":1,"type":"agent.session.failed","data":{"id":"sess_owned"}})";
  EXPECT_EQ(receiver_.Handle(Delivery("msg_1", failed)).status, 200);
  EXPECT_EQ(queue_.keys(), std::vector<api::ObjectKey>{Key("fixer")});
}

TEST_F(WebhookReceiverTest, AcknowledgesAndIgnoresWhatIsNotOurs) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  const std::string idle =
      R"({"id":"evt_3","object":"event","created_at":1,"type":"agent.session.idle","data":{"id":"sess_owned"}})";
  EXPECT_EQ(receiver_.Handle(Delivery("msg_1", ActionRequired("sess_nobody"))).status, 200);
  EXPECT_EQ(
      receiver_.Handle(Delivery("msg_2", ActionRequired("sess_owned", "function_call"))).status,
      200);
  EXPECT_EQ(receiver_.Handle(Delivery("msg_3", idle)).status, 200);
  EXPECT_TRUE(queue_.keys().empty());
  EXPECT_EQ(hints_.size(), 0u);
  EXPECT_EQ(CountOf("accepted", "unknown_session"), 1);
  EXPECT_EQ(CountOf("accepted", "ignored_action"), 1);
  EXPECT_EQ(CountOf("accepted", "ignored_type"), 1);
}

TEST_F(WebhookReceiverTest, RefusesForgedStaleFutureReplayedAndOversizedWithoutActing) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  const std::string body = ActionRequired("sess_owned");
  EXPECT_EQ(receiver_.Handle(Delivery("msg_f", body, -1, "whsec_c29tZW9uZSBlbHNl")).status, 401);
  WebhookRequest tampered = Delivery("msg_t", body);
  tampered.body = ActionRequired("sess_other");
  EXPECT_EQ(receiver_.Handle(tampered).status, 401);
  EXPECT_EQ(receiver_.Handle(Delivery("msg_s", body, Now() - 301)).status, 400);
  EXPECT_EQ(receiver_.Handle(Delivery("msg_u", body, Now() + 301)).status, 400);
  WebhookRequest unsigned_request = Delivery("msg_n", body);
  unsigned_request.headers.erase("webhook-signature");
  EXPECT_EQ(receiver_.Handle(unsigned_request).status, 400);
  WebhookRequest big = Request("POST", "/webhooks/openai", "");
  big.body_too_large = true;
  EXPECT_EQ(receiver_.Handle(big).status, 413);
  EXPECT_TRUE(queue_.keys().empty());

  ASSERT_EQ(receiver_.Handle(Delivery("msg_ok", body)).status, 200);
  ASSERT_EQ(queue_.keys().size(), 1u);
  EXPECT_EQ(receiver_.Handle(Delivery("msg_ok", body)).status, 409);  // re-signed, same id
  EXPECT_EQ(queue_.keys().size(), 1u);

  EXPECT_EQ(CountOf("rejected", "bad_signature"), 2);
  EXPECT_EQ(CountOf("rejected", "stale"), 1);
  EXPECT_EQ(CountOf("rejected", "future"), 1);
  EXPECT_EQ(CountOf("rejected", "missing_header"), 1);
  EXPECT_EQ(CountOf("rejected", "too_large"), 1);
  EXPECT_EQ(CountOf("rejected", "replayed"), 1);
}

TEST_F(WebhookReceiverTest, RefusesSignedBodiesThatAreNotTheEnvelope) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  for (const std::string body : {"not json", "[]", R"({"type":"x"})", R"({"data":{}})"}) {
    EXPECT_EQ(receiver_.Handle(Delivery("msg_" + body, body)).status, 400) << body;
  }
  EXPECT_TRUE(queue_.keys().empty());
}

TEST_F(WebhookReceiverTest, AnswersUnavailableWhileNotLeadingAndTheRetryIsNoReplay) {
  const std::string body = ActionRequired("sess_owned");
  EXPECT_EQ(receiver_.Handle(Delivery("msg_1", body)).status, 503);
  EXPECT_EQ(CountOf("unavailable", "not_leader"), 1);
  ASSERT_NO_FATAL_FAILURE(Lead());
  EXPECT_EQ(receiver_.Handle(Delivery("msg_1", body)).status, 200);
  EXPECT_EQ(queue_.keys(), std::vector<api::ObjectKey>{Key("fixer")});
  StopLeading();
  EXPECT_EQ(receiver_.Handle(Delivery("msg_2", body)).status, 503);
}

TEST_F(WebhookReceiverTest, ServesOnlyPostOnItsPath) {
  ASSERT_NO_FATAL_FAILURE(Lead());
  EXPECT_EQ(receiver_.Handle(Request("POST", "/other", "")).status, 404);
  EXPECT_EQ(receiver_.Handle(Request("GET", "/webhooks/openai", "")).status, 405);
}

}  // namespace
}  // namespace sbx::controller
