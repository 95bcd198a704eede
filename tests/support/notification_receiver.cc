#include "tests/support/notification_receiver.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <set>
#include <sstream>
#include <utility>

#include "httpserver/http_server.h"

namespace sbx::testing {
namespace {

// RFC 4648 base64, written here rather than taken from sbx (the point is independence).
std::string Base64(const unsigned char* data, size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t chunk = (uint32_t{data[i]} << 16) |
                           (i + 1 < n ? uint32_t{data[i + 1]} << 8 : 0) |
                           (i + 2 < n ? uint32_t{data[i + 2]} : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

std::string Unbase64(const std::string& text) {
  std::string out(text.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) {
    return "";
  }
  out.resize(static_cast<size_t>(n));
  size_t pad = 0;
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it) {
    ++pad;
  }
  out.resize(out.size() - pad);
  return out;
}

}  // namespace

struct NotificationReceiver::State {
  std::string secret;
  mutable std::mutex mu;
  int answer = 200;
  int port = 0;
  std::vector<Delivery> deliveries;
  std::unique_ptr<httpserver::HttpServer> server;
};

NotificationReceiver::NotificationReceiver(std::string secret) : state_(std::make_shared<State>()) {
  state_->secret = std::move(secret);
}

NotificationReceiver::~NotificationReceiver() { Stop(); }

bool NotificationReceiver::Verify(const std::string& secret, const std::string& id,
                                  const std::string& timestamp, const std::string& body,
                                  const std::string& signature) {
  const std::string key = secret.rfind("whsec_", 0) == 0 ? Unbase64(secret.substr(6)) : secret;
  const std::string signed_text = id + "." + timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), mac,
       &mac_len);
  const std::string expected = "v1," + Base64(mac, mac_len);
  std::istringstream entries(signature);
  for (std::string entry; entries >> entry;) {
    if (entry == expected) {
      return true;
    }
  }
  return false;
}

std::string NotificationReceiver::Start(int port) {
  std::shared_ptr<State> state = state_;
  state->server = std::make_unique<httpserver::HttpServer>(
      [state](httpserver::HttpExchange& x) {
        const httpserver::HttpRequest& r = x.request();
        Delivery d;
        d.webhook_id = r.Header("webhook-id");
        d.timestamp = r.Header("webhook-timestamp");
        d.signature = r.Header("webhook-signature");
        d.body = r.body;
        d.signature_ok = Verify(state->secret, d.webhook_id, d.timestamp, d.body, d.signature);
        httpserver::HttpResponse response;
        {
          std::lock_guard lock(state->mu);
          d.answered = state->answer;
          state->deliveries.push_back(d);
        }
        response.status = d.answered;
        response.body = "ok";
        x.Respond(std::move(response));
      },
      httpserver::HttpServerOptions{});
  api::StatusOr<int> bound = state->server->Start("127.0.0.1", port);
  std::lock_guard lock(state->mu);
  state->port = bound.ok() ? *bound : -1;
  return "http://127.0.0.1:" + std::to_string(state->port) + "/hook";
}

void NotificationReceiver::Stop() {
  if (state_->server) {
    state_->server->Stop();
    state_->server.reset();
  }
}

int NotificationReceiver::port() const {
  std::lock_guard lock(state_->mu);
  return state_->port;
}

void NotificationReceiver::AnswerWith(int status) {
  std::lock_guard lock(state_->mu);
  state_->answer = status;
}

std::vector<NotificationReceiver::Delivery> NotificationReceiver::deliveries() const {
  std::lock_guard lock(state_->mu);
  return state_->deliveries;
}

std::vector<NotificationReceiver::Delivery> NotificationReceiver::Accepted() const {
  std::vector<Delivery> out;
  std::set<std::string> seen;
  for (const Delivery& d : deliveries()) {
    if (d.answered >= 200 && d.answered <= 299 && seen.insert(d.webhook_id).second) {
      out.push_back(d);
    }
  }
  return out;
}

}  // namespace sbx::testing
