// NotificationReceiver: what a team's webhook endpoint is, for the Notifier tests (DESIGN §8.3).
// A real HTTP server on 127.0.0.1 (sbx::httpserver) that records every POST and checks its
// Standard Webhooks signature with an implementation of its own (OpenSSL's one-shot HMAC over
// "id.timestamp.body", compared with each "v1,<base64>" entry), independent of sbxd's
// SignWebhook. It can be told to answer with an error status, or to be down (its port closed).
//
// Thread-safety: every method may be called from any thread. Test-only.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sbx::testing {

class NotificationReceiver {
 public:
  struct Delivery {
    std::string webhook_id;
    std::string timestamp;
    std::string signature;
    std::string body;
    bool signature_ok = false;  // checked against the secret the receiver was given
    int answered = 0;           // the status it answered
  };

  // `secret`: the signing secret as sbxd is given it ("whsec_<base64>", or raw bytes).
  explicit NotificationReceiver(std::string secret);
  ~NotificationReceiver();
  NotificationReceiver(const NotificationReceiver&) = delete;
  NotificationReceiver& operator=(const NotificationReceiver&) = delete;

  // Listens on 127.0.0.1: on `port`, or a free one when 0. Returns the URL ("http://…/hook").
  std::string Start(int port = 0);
  // Closes the port (the receiver is down until Start(port()) again).
  void Stop();
  int port() const;

  // The status every POST gets from now on (200 unless set).
  void AnswerWith(int status);

  std::vector<Delivery> deliveries() const;
  // The deliveries answered 2xx, one per webhook-id (what a receiver that dedupes keeps).
  std::vector<Delivery> Accepted() const;

  // The independent check: does `signature` carry a v1 entry that is the HMAC-SHA256 of
  // "id.timestamp.body" under `secret`?
  static bool Verify(const std::string& secret, const std::string& id, const std::string& timestamp,
                     const std::string& body, const std::string& signature);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sbx::testing
