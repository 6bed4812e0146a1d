// InMemoryStore: the Store of threads in one process (tests, single-process paths).
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>

#include "railyard/net/store.h"

namespace railyard::net {
namespace {

class InMemoryStore final : public Store {
 public:
  Status Set(std::string_view key, std::string_view value, base::Deadline) override {
    std::lock_guard lock(mu_);
    values_[std::string(key)] = std::string(value);
    changed_.notify_all();
    return Status::Ok();
  }

  Result<std::string> Get(std::string_view key, base::Deadline deadline) override {
    std::unique_lock lock(mu_);
    if (!WaitFor(lock, deadline, [&] { return values_.count(std::string(key)) > 0; })) {
      return DeadlineExceeded("{}: key '{}' was not set before the deadline", Describe(), key);
    }
    return values_[std::string(key)];
  }

  Result<int64_t> Add(std::string_view key, int64_t delta, base::Deadline) override {
    std::lock_guard lock(mu_);
    std::string& v = values_[std::string(key)];
    int64_t current = 0;
    if (!v.empty()) {
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return InvalidArgument("{}: key '{}' holds '{}', not an integer", Describe(), key, v);
      }
    }
    current += delta;
    v = std::to_string(current);
    changed_.notify_all();
    return current;
  }

  Result<std::string> CompareAndSet(std::string_view key, std::string_view expected,
                                    std::string_view desired, base::Deadline) override {
    std::lock_guard lock(mu_);
    auto it = values_.find(std::string(key));
    std::string_view present = it == values_.end() ? std::string_view() : it->second;
    if (present != expected) return std::string(present);
    values_[std::string(key)] = std::string(desired);
    changed_.notify_all();
    return std::string(desired);
  }

  using Store::Wait;
  Status Wait(std::span<const std::string> keys, base::Deadline deadline,
              std::vector<std::string>* missing_out) override {
    std::unique_lock lock(mu_);
    auto all_set = [&] {
      for (const auto& k : keys) {
        if (!values_.count(k)) return false;
      }
      return true;
    };
    if (WaitFor(lock, deadline, all_set)) return Status::Ok();
    std::string missing;
    for (const auto& k : keys) {
      if (values_.count(k)) continue;
      missing += (missing.empty() ? "" : ", ") + k;
      if (missing_out != nullptr) missing_out->push_back(k);
    }
    return DeadlineExceeded("{}: keys not set before the deadline: {}", Describe(), missing);
  }

  std::string Describe() const override { return "in-memory store"; }

 private:
  template <typename Pred>
  bool WaitFor(std::unique_lock<std::mutex>& lock, base::Deadline deadline, Pred pred) {
    if (deadline.IsNever()) {
      changed_.wait(lock, pred);
      return true;
    }
    return changed_.wait_until(lock, deadline.when(), pred);
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace

std::unique_ptr<Store> NewInMemoryStore() { return std::make_unique<InMemoryStore>(); }

}  // namespace railyard::net
