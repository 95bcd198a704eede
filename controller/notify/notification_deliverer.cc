#include "controller/notify/notification_deliverer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "api/conditions.h"
#include "api/rfc3339.h"
#include "api/validation.h"
#include "controller/notify/notification_payload.h"
#include "controller/webhook/webhook_verifier.h"

namespace sbx::controller::notify {
namespace {

using api::Object;
using api::Status;
using api::StatusOr;

// How often a suspended Notifier's notifications are looked at again.
constexpr std::chrono::milliseconds kSuspendedRecheck{60'000};

// A reason for Ready=False from a resolution error: the secret resolver's kInvalidArgument is a
// reference the policy refuses; its kFailedPrecondition a value that is not there.
std::string_view ReasonOf(const Status& error) {
  switch (error.code()) {
    case api::StatusCode::kInvalidArgument:
      return api::reason::kSecretNotAllowed;
    case api::StatusCode::kFailedPrecondition:
      return api::reason::kCredentialsMissing;
    default:
      return api::reason::kInvalidSpec;
  }
}

}  // namespace

NotificationDeliverer::NotificationDeliverer(Store& store, http::HttpTransport& transport,
                                             Clock& clock, Options options)
    : store_(store), transport_(transport), clock_(clock), options_(std::move(options)) {}

StatusOr<NotificationDeliverer::Resolved> NotificationDeliverer::Resolve(const Object& notifier) {
  const api::NotifierSpec& spec = notifier.notifier_spec();
  const std::string& ns = notifier.metadata.namespace_;
  Resolved r;
  ASSIGN_OR_RETURN(
      r.url, ResolveSecret(spec.url_from, options_.env, "spec.urlFrom", options_.secrets, ns));
  if (options_.register_secret) {
    options_.register_secret(r.url);
  }
  // The URL is a secret (a Slack hook's path is its credential): the problem, never the URL.
  if (const std::string problem = api::ValidateServiceUrl(r.url); !problem.empty()) {
    return api::InvalidArgumentError(
        "spec.urlFrom: the URL it holds is not one sbx sends to (https://, or http:// to a "
        "loopback host only, no user info)");
  }
  if (spec.type == api::NotifierType::kWebhook) {
    ASSIGN_OR_RETURN(r.signing_secret,
                     ResolveSecret(spec.signing_secret_from, options_.env, "spec.signingSecretFrom",
                                   options_.secrets, ns));
    if (options_.register_secret) {
      options_.register_secret(r.signing_secret);
    }
  }
  return r;
}

Status NotificationDeliverer::Send(const Object& notifier, const Store::Notification& n,
                                   std::stop_token stop) {
  ASSIGN_OR_RETURN(const Resolved resolved, Resolve(notifier));
  http::HttpRequest request;
  request.method = "POST";
  request.url = resolved.url;
  request.timeout = options_.timeout;
  request.headers.emplace_back("Content-Type", "application/json");
  if (notifier.notifier_spec().type == api::NotifierType::kSlack) {
    request.body = SlackPayload(n);
  } else {
    request.body = WebhookPayload(n);
    ASSIGN_OR_RETURN(const WebhookSecret secret, WebhookSecret::Parse(resolved.signing_secret));
    // A fresh timestamp and signature per attempt; the id stays (Standard Webhooks).
    const std::string timestamp = std::to_string(
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count());
    request.headers.emplace_back("webhook-id", n.webhook_id);
    request.headers.emplace_back("webhook-timestamp", timestamp);
    request.headers.emplace_back("webhook-signature",
                                 SignWebhook(secret, n.webhook_id, timestamp, *request.body));
  }
  const http::HttpResult result = transport_.Send(request, std::move(stop));
  if (!result.status.ok()) {
    // The transport's words may quote the URL; the registered secrets are scrubbed from what is
    // stored (ScrubbingStore), and the code alone says enough.
    return api::Status(result.status.code(),
                       "cannot reach the Notifier's URL (" +
                           std::string(api::StatusCodeName(result.status.code())) + ")");
  }
  if (result.response.status < 200 || result.response.status > 299) {
    return api::UnavailableError("the Notifier's URL answered HTTP " +
                                 std::to_string(result.response.status));
  }
  return api::OkStatus();
}

StatusOr<NotificationDeliverer::Round> NotificationDeliverer::DeliverOnce(std::stop_token stop) {
  Round round;
  const int64_t now = api::UnixMillis(clock_.Now());
  ASSIGN_OR_RETURN(std::vector<Store::Notification> due,
                   store_.ListDueNotifications(now, options_.batch));
  std::map<std::string, Outcome> outcomes;  // by Notifier uid
  std::map<api::ObjectKey, StatusOr<Object>> notifiers;
  for (const Store::Notification& n : due) {
    if (stop.stop_requested()) {
      break;
    }
    if (options_.owns) {
      StatusOr<bool> mine = options_.owns(n.object);
      if (!mine.ok() || !*mine) {
        continue;
      }
    }
    auto [it, fresh] = notifiers.try_emplace(n.notifier, api::NotFoundError(""));
    if (fresh) {
      it->second = store_.Get(n.notifier);
    }
    const StatusOr<Object>& notifier = it->second;
    if (!notifier.ok() && notifier.status().code() != api::StatusCode::kNotFound) {
      continue;  // the store will answer next round
    }
    if (!notifier.ok() || notifier->metadata.uid != n.notifier_uid) {
      RETURN_IF_ERROR(store_.FinishNotification(n.id));  // its Notifier is gone
      ++round.abandoned;
      ++abandoned_;
      continue;
    }
    if (notifier->notifier_spec().suspend) {
      // It waits, looked at again a minute later without counting an attempt: rows left due
      // would fill every round's batch and starve the other Notifiers.
      RETURN_IF_ERROR(store_.RetryNotification(
          n.id, n.attempts, api::UnixMillis(clock_.Now()) + kSuspendedRecheck.count(),
          n.last_error));
      continue;
    }
    Outcome& outcome = outcomes[n.notifier_uid];
    const Status sent = Send(*notifier, n, stop);
    if (sent.ok()) {
      RETURN_IF_ERROR(store_.FinishNotification(n.id));
      ++round.delivered;
      ++delivered_;
      ++outcome.delivered;
      outcome.last_delivered_ms = api::UnixMillis(clock_.Now());
      continue;
    }
    const int64_t attempts = n.attempts + 1;
    // first_retry, doubling, at most max_retry (no overflow: the shift stops at 2^30).
    const int64_t delay = std::min<int64_t>(
        options_.max_retry.count(),
        options_.first_retry.count() * (int64_t{1} << std::min<int64_t>(attempts - 1, 30)));
    RETURN_IF_ERROR(store_.RetryNotification(n.id, attempts, api::UnixMillis(clock_.Now()) + delay,
                                             std::string(sent.message())));
    ++round.failed;
    ++failed_;
    outcome.last_failed_ms = api::UnixMillis(clock_.Now());
    outcome.last_error = std::string(sent.message());
  }
  RETURN_IF_ERROR(UpdateStatuses(outcomes));
  return round;
}

Status NotificationDeliverer::UpdateStatuses(const std::map<std::string, Outcome>& outcomes) {
  const bool all = !options_.owns_status || options_.owns_status();
  if (!all && outcomes.empty()) {
    return api::OkStatus();
  }
  ListOptions list;
  list.kind = api::Kind::kNotifier;
  ASSIGN_OR_RETURN(std::vector<Object> notifiers, store_.List(list));
  ASSIGN_OR_RETURN(std::vector<Store::NotificationCount> counts, store_.NotificationCounts());
  const std::string now = api::FormatRfc3339(clock_.Now());
  for (Object& notifier : notifiers) {
    const auto outcome = outcomes.find(notifier.metadata.uid);
    if (!all && outcome == outcomes.end()) {
      continue;
    }
    // A conflict (someone else wrote the status since the list) is read again, a few times.
    for (int attempt = 0; attempt < 3; ++attempt) {
      api::NotifierStatus& s = notifier.notifier_status();
      const api::NotifierStatus before = s;
      s.observed_generation = notifier.metadata.generation;
      s.pending = 0;
      for (const Store::NotificationCount& c : counts) {
        if (c.notifier_uid == notifier.metadata.uid) {
          s.pending = c.pending;
          s.dropped = c.dropped;
        }
      }
      if (outcome != outcomes.end()) {
        const Outcome& o = outcome->second;
        s.delivered += o.delivered;
        if (o.last_delivered_ms > 0) {
          s.last_delivered_at = api::FormatRfc3339(api::FromUnixMillis(o.last_delivered_ms));
        }
        if (o.last_failed_ms > o.last_delivered_ms) {
          s.last_error = o.last_error;
        } else if (o.last_delivered_ms > 0) {
          s.last_error.clear();
        }
      }
      api::Condition ready{std::string(api::condition::kReady),
                           api::ConditionStatus::kTrue,
                           std::string(api::reason::kReady),
                           "its URL and secrets resolve",
                           "",
                           notifier.metadata.generation};
      if (notifier.notifier_spec().suspend) {
        ready.status = api::ConditionStatus::kFalse;
        ready.reason = "Suspended";
        ready.message = "spec.suspend is set: notifications wait";
      } else if (StatusOr<Resolved> resolved = Resolve(notifier); !resolved.ok()) {
        ready.status = api::ConditionStatus::kFalse;
        ready.reason = std::string(ReasonOf(resolved.status()));
        ready.message = std::string(resolved.status().message());
      }
      api::SetCondition(s.conditions, std::move(ready), now);
      if (s == before) {
        break;
      }
      StatusOr<Object> written = store_.UpdateStatus(notifier);
      if (written.ok() || written.status().code() != api::StatusCode::kAborted) {
        RETURN_IF_ERROR(written.status().code() == api::StatusCode::kNotFound ? api::OkStatus()
                                                                              : written.status());
        break;
      }
      ASSIGN_OR_RETURN(notifier, store_.Get(api::KeyOf(notifier)));
    }
  }
  return api::OkStatus();
}

void NotificationDeliverer::Run(std::stop_token stop,
                                const std::function<void(const Status&)>& report) {
  do {
    StatusOr<Round> round = DeliverOnce(stop);
    if (!round.ok() && report) {
      report(round.status());
    }
  } while (clock_.SleepFor(options_.interval, stop));
}

}  // namespace sbx::controller::notify
