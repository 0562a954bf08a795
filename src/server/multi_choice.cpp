#include "server/multi_choice.h"

#include <mutex>
#include <vector>

#include "common/json.h"

namespace deepinfer::server {
namespace {

class MultiChoiceMerger {
 public:
  MultiChoiceMerger(int n, ResponderPtr target) : replies_(n), target_(std::move(target)) {}

  void deliver(int index, HttpResponse reply) {
    std::lock_guard lock(mu_);
    if (sent_) return;
    if (reply.status != 200) {
      sent_ = true;
      target_->send(std::move(reply));
      return;
    }
    replies_[index] = std::move(reply.body);
    if (++received_ == static_cast<int>(replies_.size())) {
      sent_ = true;
      target_->send(merge());
    }
  }
  const ResponderPtr& target() const { return target_; }

 private:
  HttpResponse merge() {
    auto first = parse_json(replies_[0]);
    if (!first.ok() || !first.value().is_object())
      return HttpResponse{
          500,
          "application/json",
          R"({"error":{"message":"internal error merging choices","type":"internal_error","param":null,"code":"internal_error"}})",
          {}};
    JsonObject merged = first.value().as_object();
    JsonArray choices;
    int64_t completion = 0;
    for (size_t i = 0; i < replies_.size(); ++i) {
      auto one = parse_json(replies_[i]);
      if (!one.ok()) continue;
      auto& obj = one.value().as_object();
      if (auto* c = obj.if_contains("choices"); c && c->is_array() && !c->as_array().empty()) {
        Json choice = c->as_array()[0];
        choice.as_object()["index"] = static_cast<int64_t>(i);
        choices.push_back(std::move(choice));
      }
      if (auto* u = obj.if_contains("usage"); u && u->is_object())
        if (auto* ct = u->as_object().if_contains("completion_tokens"); ct && ct->is_int64())
          completion += ct->get_int64();
    }
    merged["choices"] = std::move(choices);
    if (auto* u = merged.if_contains("usage"); u && u->is_object()) {
      auto& usage = u->as_object();
      usage["completion_tokens"] = completion;
      if (auto* pt = usage.if_contains("prompt_tokens"); pt && pt->is_int64())
        usage["total_tokens"] = pt->get_int64() + completion;
    }
    return HttpResponse{200, "application/json", to_json(merged), {}};
  }

  std::mutex mu_;
  std::vector<std::string> replies_;
  int received_ = 0;
  bool sent_ = false;
  ResponderPtr target_;
};

class ChoiceResponder final : public Responder {
 public:
  ChoiceResponder(std::shared_ptr<MultiChoiceMerger> merger, int index)
      : merger_(std::move(merger)), index_(index) {}
  void send(HttpResponse response) override { merger_->deliver(index_, std::move(response)); }
  void open_stream(int, std::string, Headers) override {}
  void write(std::string_view) override {}
  void close() override {}
  void post(std::shared_ptr<PostedWork> work) override { merger_->target()->post(std::move(work)); }
  int loop_index() const override { return merger_->target()->loop_index(); }
  void on_disconnect(std::function<void()> callback) override {
    // All choices share the client's connection; each registers its own abort.
    auto previous = std::make_shared<std::function<void()>>(std::move(callback));
    chain_->push_back(previous);
  }
  bool disconnected() const override { return merger_->target()->disconnected(); }
  std::shared_ptr<std::vector<std::shared_ptr<std::function<void()>>>> chain_;

 private:
  std::shared_ptr<MultiChoiceMerger> merger_;
  int index_;
};

class MultiChoiceStream {
 public:
  MultiChoiceStream(int n, ResponderPtr target,
                    std::function<std::string(const recipe::Usage&)> usage_chunk)
      : open_(static_cast<size_t>(n), true),
        usage_(static_cast<size_t>(n)),
        target_(std::move(target)),
        usage_chunk_(std::move(usage_chunk)) {}

  void write(std::string_view chunk) {
    std::lock_guard lock(mu_);
    if (!finished_) target_->write(chunk);
  }
  void report(int index, const recipe::Usage& usage) {
    std::lock_guard lock(mu_);
    usage_[static_cast<size_t>(index)] = usage;
  }
  void closed(int index) {
    std::lock_guard lock(mu_);
    if (finished_ || !open_[static_cast<size_t>(index)]) return;
    open_[static_cast<size_t>(index)] = false;
    if (++closed_ < static_cast<int>(open_.size())) return;
    finished_ = true;
    recipe::Usage total;
    for (const auto& u : usage_) {
      if (total.prompt_tokens == 0) {
        total.prompt_tokens = u.prompt_tokens;
        total.prompt_cache_hit_tokens = u.prompt_cache_hit_tokens;
      }
      total.completion_tokens += u.completion_tokens;
    }
    std::string tail;
    if (usage_chunk_) {
      const std::string data = usage_chunk_(total);
      if (!data.empty()) tail = "data: " + data + "\n\n";
    }
    tail += "data: [DONE]\n\n";
    target_->write(tail);
    target_->close();
  }
  const ResponderPtr& target() const { return target_; }

 private:
  std::mutex mu_;
  std::vector<bool> open_;
  std::vector<recipe::Usage> usage_;
  int closed_ = 0;
  bool finished_ = false;
  ResponderPtr target_;
  std::function<std::string(const recipe::Usage&)> usage_chunk_;
};

// All choices share the client's connection; each registers its own abort.
using AbortChain = std::vector<std::shared_ptr<std::function<void()>>>;

class StreamChoiceResponder final : public Responder {
 public:
  StreamChoiceResponder(std::shared_ptr<MultiChoiceStream> stream, int index,
                        std::shared_ptr<AbortChain> chain)
      : stream_(std::move(stream)), index_(index), chain_(std::move(chain)) {}
  // A reply instead of a stream (an error before the first frame) travels as one event.
  void send(HttpResponse response) override {
    stream_->write("data: " + response.body + "\n\n");
    stream_->closed(index_);
  }
  void open_stream(int, std::string, Headers) override {}
  void write(std::string_view chunk) override { stream_->write(chunk); }
  void post(std::shared_ptr<PostedWork> work) override { stream_->target()->post(std::move(work)); }
  int loop_index() const override { return stream_->target()->loop_index(); }
  void close() override { stream_->closed(index_); }
  void on_disconnect(std::function<void()> callback) override {
    chain_->push_back(std::make_shared<std::function<void()>>(std::move(callback)));
  }
  bool disconnected() const override { return stream_->target()->disconnected(); }

 private:
  std::shared_ptr<MultiChoiceStream> stream_;
  int index_;
  std::shared_ptr<AbortChain> chain_;
};

}  // namespace

void run_multi_choice_stream(int n, ResponderPtr target,
                             std::function<std::string(const recipe::Usage&)> usage_chunk,
                             const std::function<void(int index, ResponderPtr responder,
                                                      UsageCallback on_usage)>& make_one) {
  target->open_stream(200, "text/event-stream");
  auto stream = std::make_shared<MultiChoiceStream>(n, target, std::move(usage_chunk));
  auto aborts = std::make_shared<AbortChain>();
  for (int i = 0; i < n; ++i) {
    make_one(i, std::make_shared<StreamChoiceResponder>(stream, i, aborts),
             [stream, i](const recipe::Usage& u) { stream->report(i, u); });
  }
  target->on_disconnect([aborts] {
    for (auto& f : *aborts)
      if (*f) (*f)();
  });
}

void run_multi_choice(int n, ResponderPtr target,
                      const std::function<void(int index, ResponderPtr responder)>& make_one) {
  auto merger = std::make_shared<MultiChoiceMerger>(n, target);
  auto aborts = std::make_shared<std::vector<std::shared_ptr<std::function<void()>>>>();
  std::vector<std::shared_ptr<ChoiceResponder>> responders;
  for (int i = 0; i < n; ++i) {
    auto r = std::make_shared<ChoiceResponder>(merger, i);
    r->chain_ = aborts;
    responders.push_back(r);
  }
  for (int i = 0; i < n; ++i) make_one(i, responders[static_cast<size_t>(i)]);
  target->on_disconnect([aborts] {
    for (auto& f : *aborts)
      if (*f) (*f)();
  });
}

}  // namespace deepinfer::server
