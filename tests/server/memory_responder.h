// An in-memory Responder for driving the API handlers without sockets (tests, fuzzing): it
// records the status, headers and body of a reply or an SSE stream, lets the caller wait for
// the exchange to complete, and can simulate the client going away.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "server/http_types.h"

namespace deepinfer::server::testing {

class MemoryResponder final : public Responder {
 public:
  void send(HttpResponse response) override {
    std::lock_guard lock(mu_);
    if (done_) return;
    reply_ = std::move(response);
    done_ = true;
    cv_.notify_all();
  }
  void open_stream(int status, std::string content_type, Headers headers) override {
    std::lock_guard lock(mu_);
    reply_.status = status;
    reply_.content_type = std::move(content_type);
    reply_.headers = std::move(headers);
    streamed_ = true;
  }
  void write(std::string_view chunk) override {
    std::lock_guard lock(mu_);
    reply_.body += chunk;
    ++writes_;
    cv_.notify_all();
  }
  void post(std::shared_ptr<PostedWork> work) override { work->run(); }  // at once, here
  void close() override {
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void on_disconnect(std::function<void()> callback) override {
    std::unique_lock lock(mu_);
    if (disconnected_) {
      lock.unlock();
      if (callback) callback();
      return;
    }
    on_disconnect_ = std::move(callback);
  }
  bool disconnected() const override {
    std::lock_guard lock(mu_);
    return disconnected_;
  }

  // The client goes away: the registered callback runs once.
  void disconnect() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mu_);
      if (disconnected_) return;
      disconnected_ = true;
      callback = std::move(on_disconnect_);
    }
    if (callback) callback();
  }
  // Waits until the exchange is complete; false on timeout.
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }
  // Waits until at least `n` stream writes arrived; false on timeout.
  bool wait_writes(int n, std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return writes_ >= n || done_; });
  }
  HttpResponse reply() const {
    std::lock_guard lock(mu_);
    return reply_;
  }
  bool streamed() const {
    std::lock_guard lock(mu_);
    return streamed_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  HttpResponse reply_;
  bool done_ = false;
  bool streamed_ = false;
  bool disconnected_ = false;
  int writes_ = 0;
  std::function<void()> on_disconnect_;
};

}  // namespace deepinfer::server::testing
