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
      return HttpResponse{500, "application/json",
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
  void write(std::string) override {}
  void close() override {}
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

}  // namespace

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
