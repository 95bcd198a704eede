// NotificationDeliverer against a real receiver (tests/support/notification_receiver.h: its own
// Standard Webhooks check) over loopback HTTP, the outbox in a real SQLite file, time from a
// FakeClock so that back-off is stepped, not slept: delivery and its payload, a retry after a
// 500 within 5 s with the same webhook-id and a fresh signature, a receiver down for 30 s, a
// Notifier deleted or suspended, Slack's text, a URL that is not allowed, and the status.
#include "controller/notify/notification_deliverer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/conditions.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/notification_receiver.h"

namespace sbx::controller::notify {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kSecret[] = "whsec_c2J4LW5vdGlmaWVyLXRlc3Qtc2lnbmluZy1rZXk=";

class NotificationDelivererTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("sbx-notify-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    SqliteStore::Options o;
    o.clock = &clock_;
    auto store = SqliteStore::Open((dir_ / "sbx.db").string(), o);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    url_ = receiver_.Start();
    env_["SBX_SECRET_DEFAULT_HOOK"] = url_;
    env_["SBX_SECRET_DEFAULT_SIGNING"] = kSecret;
    NotificationDelivererOptions options;
    options.env = Env();
    options.timeout = std::chrono::seconds(5);
    deliverer_ = std::make_unique<NotificationDeliverer>(*store_, *transport_, clock_, options);
  }
  // env_ as the deliverer looks {env: …} references up.
  EnvLookup Env() {
    return [this](std::string_view name) -> std::optional<std::string> {
      auto it = env_.find(std::string(name));
      return it == env_.end() ? std::nullopt : std::optional(it->second);
    };
  }
  void TearDown() override {
    receiver_.Stop();
    fs::remove_all(dir_);
  }

  Object ApplyNotifier(const std::string& name,
                       api::NotifierType type = api::NotifierType::kWebhook) {
    Object o = api::MakeObject(api::Kind::kNotifier, name);
    o.notifier_spec().type = type;
    o.notifier_spec().url_from.env = "SBX_SECRET_DEFAULT_HOOK";
    if (type == api::NotifierType::kWebhook) {
      o.notifier_spec().signing_secret_from.env = "SBX_SECRET_DEFAULT_SIGNING";
    }
    o.notifier_spec().events = {"TaskFailed", "TaskSucceeded"};
    auto applied = store_->Apply({o}, {});
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? applied->front().object : o;
  }
  // A task that fails: its status write puts the notification in the outbox.
  void FailTask(const std::string& name) {
    Object task = api::MakeObject(api::Kind::kAgentTask, name);
    task.agent_task_spec().input = "hi";
    task.agent_task_spec().worker_ref = "w";
    auto applied = store_->Apply({task}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
    Object stored = applied->front().object;
    stored.agent_task_status().phase = api::TaskPhase::kFailed;
    stored.agent_task_status().worker = "w";
    stored.agent_task_status().result.error = {"turn_failed", "the model gave up"};
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
  }
  NotificationDeliverer::Round MustDeliver() {
    auto round = deliverer_->DeliverOnce();
    EXPECT_TRUE(round.ok()) << round.status();
    return round.ok() ? *round : NotificationDeliverer::Round{};
  }
  api::NotifierStatus StatusOf(const std::string& name) {
    return store_->Get({api::Kind::kNotifier, "default", name})->notifier_status();
  }

  fs::path dir_;
  sbx::testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  sbx::testing::NotificationReceiver receiver_{kSecret};
  std::string url_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<http::HttpTransport> transport_ = http::MakeCppRestTransport();
  std::unique_ptr<NotificationDeliverer> deliverer_;
};

TEST_F(NotificationDelivererTest, ASignedWebhookCarriesTheNoticeAndTheTaskFacts) {
  const Object nt = ApplyNotifier("alerts");
  FailTask("nightly");
  const NotificationDeliverer::Round round = MustDeliver();
  EXPECT_EQ(round.delivered, 1);
  const auto got = receiver_.deliveries();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].signature_ok) << got[0].signature;
  // The receiver's check can fail: another key, or another body, is refused.
  EXPECT_FALSE(sbx::testing::NotificationReceiver::Verify(
      "whsec_b3RoZXIta2V5", got[0].webhook_id, got[0].timestamp, got[0].body, got[0].signature));
  EXPECT_FALSE(sbx::testing::NotificationReceiver::Verify(
      kSecret, got[0].webhook_id, got[0].timestamp, got[0].body + " ", got[0].signature));
  EXPECT_EQ(got[0].webhook_id.rfind("msg_", 0), 0u);
  const json body = json::parse(got[0].body);
  EXPECT_EQ(body["type"], "Warning");
  EXPECT_EQ(body["reason"], "TaskFailed");
  EXPECT_EQ(body["object"]["kind"], "AgentTask");
  EXPECT_EQ(body["object"]["namespace"], "default");
  EXPECT_EQ(body["object"]["name"], "nightly");
  EXPECT_FALSE(body["object"]["uid"].get<std::string>().empty());
  EXPECT_EQ(body["message"], "turn_failed: the model gave up");
  EXPECT_EQ(body["time"], "2026-09-01T12:00:00Z");
  EXPECT_EQ(body["task"]["phase"], "Failed");
  EXPECT_EQ(body["task"]["worker"], "w");
  EXPECT_TRUE(body["task"].contains("usage"));
  EXPECT_TRUE(body["task"].contains("durationSeconds"));
  // Neither the URL nor the secret is in what was sent.
  EXPECT_EQ(got[0].body.find(url_), std::string::npos);
  EXPECT_EQ(got[0].body.find("whsec_"), std::string::npos);
  // Done: the outbox is empty, and the Notifier says so.
  EXPECT_EQ(MustDeliver().delivered, 0);
  const api::NotifierStatus s = StatusOf("alerts");
  EXPECT_EQ(s.delivered, 1);
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.last_delivered_at, "2026-09-01T12:00:00Z");
  EXPECT_EQ(s.last_error, "");
  const api::Condition* ready = api::FindCondition(s.conditions, api::condition::kReady);
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, api::ConditionStatus::kTrue);
  (void)nt;
}

TEST_F(NotificationDelivererTest, AFailedAttemptIsRetriedWithinFiveSecondsUnderTheSameId) {
  ApplyNotifier("alerts");
  FailTask("t");
  receiver_.AnswerWith(500);
  EXPECT_EQ(MustDeliver().failed, 1);
  EXPECT_EQ(StatusOf("alerts").last_error, "the Notifier's URL answered HTTP 500");
  EXPECT_EQ(StatusOf("alerts").pending, 1);
  receiver_.AnswerWith(200);
  clock_.Advance(std::chrono::milliseconds(4'999));
  EXPECT_EQ(MustDeliver().delivered, 0);  // not due yet
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(MustDeliver().delivered, 1);
  const auto got = receiver_.deliveries();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].webhook_id, got[1].webhook_id);  // the receiver can dedupe
  EXPECT_NE(got[0].timestamp, got[1].timestamp);    // a fresh timestamp…
  EXPECT_NE(got[0].signature, got[1].signature);    // …and signature per attempt
  EXPECT_TRUE(got[0].signature_ok);
  EXPECT_TRUE(got[1].signature_ok);
  EXPECT_EQ(receiver_.Accepted().size(), 1u);
  EXPECT_EQ(StatusOf("alerts").last_error, "");
}

TEST_F(NotificationDelivererTest, AReceiverDownForThirtySecondsGetsItWhenBackWithDoublingDelays) {
  ApplyNotifier("alerts");
  FailTask("t");
  receiver_.Stop();
  // Attempts at 0 s, 5 s, 15 s (5 + 10), 35 s (15 + 20): the receiver is back at 30 s.
  std::vector<int> failed_at;
  for (int s = 0; s <= 40; ++s) {
    if (s == 30) {
      receiver_.Start(std::stoi(url_.substr(url_.rfind(':') + 1)));
    }
    const NotificationDeliverer::Round r = MustDeliver();
    if (r.failed > 0) {
      failed_at.push_back(s);
    }
    if (r.delivered > 0) {
      EXPECT_EQ(s, 35);
      break;
    }
    clock_.Advance(std::chrono::seconds(1));
  }
  EXPECT_EQ(failed_at, (std::vector<int>{0, 5, 15}));
  ASSERT_EQ(receiver_.Accepted().size(), 1u);
  EXPECT_TRUE(receiver_.Accepted()[0].signature_ok);
  EXPECT_THAT(StatusOf("alerts").last_error, ::testing::IsEmpty());
}

TEST_F(NotificationDelivererTest, ADeletedNotifierDropsItsNotificationsAndASuspendedOneHoldsThem) {
  ApplyNotifier("gone");
  Object held = ApplyNotifier("held");
  FailTask("t");
  ASSERT_TRUE(store_->Delete({api::Kind::kNotifier, "default", "gone"}).ok());
  held.notifier_spec().suspend = true;
  ASSERT_TRUE(store_->Apply({held}, {}).ok());
  const NotificationDeliverer::Round r = MustDeliver();
  EXPECT_EQ(r.abandoned, 1);
  EXPECT_EQ(r.delivered, 0);
  EXPECT_TRUE(receiver_.deliveries().empty());
  const api::NotifierStatus s = StatusOf("held");
  EXPECT_EQ(s.pending, 1);
  EXPECT_EQ(api::FindCondition(s.conditions, api::condition::kReady)->reason, "Suspended");
  held = *store_->Get(api::KeyOf(held));
  held.notifier_spec().suspend = false;
  ASSERT_TRUE(store_->Apply({held}, {}).ok());
  // Resumed: what waited goes when it is looked at again, within a minute.
  EXPECT_EQ(MustDeliver().delivered, 0);
  clock_.Advance(std::chrono::seconds(60));
  EXPECT_EQ(MustDeliver().delivered, 1);
  EXPECT_EQ(deliverer_->stats().abandoned, 1);
  EXPECT_EQ(deliverer_->stats().delivered, 1);
}

// A suspended Notifier's waiting notifications must not fill every round's batch: the others'
// still go.
TEST_F(NotificationDelivererTest, ASuspendedNotifiersBacklogDoesNotHoldUpTheOthers) {
  // Three notifications for "held", then it is suspended.
  Object held = ApplyNotifier("held");
  FailTask("a");
  FailTask("b");
  FailTask("c");
  held = *store_->Get(api::KeyOf(held));
  held.notifier_spec().suspend = true;
  ASSERT_TRUE(store_->Apply({held}, {}).ok());
  ApplyNotifier("alerts");
  clock_.Advance(std::chrono::seconds(1));
  FailTask("d");
  NotificationDelivererOptions small;
  small.env = Env();
  small.batch = 2;
  NotificationDeliverer deliverer(*store_, *transport_, clock_, small);
  int delivered = 0;
  for (int round = 0; round < 3 && delivered == 0; ++round) {
    auto r = deliverer.DeliverOnce();
    ASSERT_TRUE(r.ok()) << r.status();
    delivered += r->delivered;
  }
  EXPECT_EQ(delivered, 1);
  ASSERT_EQ(receiver_.Accepted().size(), 1u);
  EXPECT_NE(receiver_.Accepted()[0].body.find(R"("name":"d")"), std::string::npos);
  EXPECT_EQ(StatusOf("held").pending, 3);
}

TEST_F(NotificationDelivererTest, SlackGetsOneLineOfText) {
  ApplyNotifier("chat", api::NotifierType::kSlack);
  FailTask("nightly");
  EXPECT_EQ(MustDeliver().delivered, 1);
  const auto got = receiver_.deliveries();
  ASSERT_EQ(got.size(), 1u);
  const json body = json::parse(got[0].body);
  EXPECT_EQ(body["text"],
            "[Warning] TaskFailed agenttask default/nightly: turn_failed: the model gave up (phase "
            "Failed, worker w, 0 tokens)");
  EXPECT_EQ(got[0].signature, "");  // Slack's incoming webhooks are not signed
}

TEST_F(NotificationDelivererTest, AUrlThatIsNotAllowedIsNeverCalledAndSaysWhyWithoutTheUrl) {
  env_["SBX_SECRET_DEFAULT_HOOK"] = "http://hooks.example.com/secret-path-token";
  ApplyNotifier("alerts");
  FailTask("t");
  EXPECT_EQ(MustDeliver().failed, 1);
  EXPECT_TRUE(receiver_.deliveries().empty());
  const api::NotifierStatus s = StatusOf("alerts");
  EXPECT_THAT(s.last_error, HasSubstr("https://"));
  EXPECT_EQ(s.last_error.find("secret-path-token"), std::string::npos);
  const api::Condition* ready = api::FindCondition(s.conditions, api::condition::kReady);
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, api::ConditionStatus::kFalse);
  EXPECT_EQ(ready->message.find("secret-path-token"), std::string::npos);
  // A missing signing secret is said the same way.
  env_.erase("SBX_SECRET_DEFAULT_SIGNING");
  env_["SBX_SECRET_DEFAULT_HOOK"] = url_;
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_EQ(MustDeliver().failed, 1);
  EXPECT_THAT(StatusOf("alerts").last_error, HasSubstr("spec.signingSecretFrom"));
  EXPECT_EQ(api::FindCondition(StatusOf("alerts").conditions, api::condition::kReady)->reason,
            "CredentialsMissing");
}

}  // namespace
}  // namespace sbx::controller::notify
