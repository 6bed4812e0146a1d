#include "examples/train/mlp.h"

#include <cmath>
#include <cstring>

#include "railyard/storage/synthetic_data.h"

namespace railyard::train_example {

Mlp::Mlp(MlpShape shape) : shape_(shape) {}

void Mlp::Init(uint64_t seed, float* params) const {
  Rng rng(storage::Mix64(seed ^ 0x6d6c702d696e6974ull));  // "mlp-init"
  const float s1 = 1.0f / std::sqrt(static_cast<float>(shape_.inputs));
  const float s2 = 1.0f / std::sqrt(static_cast<float>(shape_.hidden));
  for (size_t i = w1_offset(); i < b1_offset(); ++i) params[i] = s1 * rng.Uniform();
  for (size_t i = b1_offset(); i < w2_offset(); ++i) params[i] = 0.0f;
  for (size_t i = w2_offset(); i < b2_offset(); ++i) params[i] = s2 * rng.Uniform();
  params[b2_offset()] = 0.0f;
}

float Mlp::Forward(const float* params, const float* x, float* hidden) const {
  const float* w1 = params + w1_offset();
  const float* b1 = params + b1_offset();
  const float* w2 = params + w2_offset();
  float out = params[b2_offset()];
  for (int j = 0; j < shape_.hidden; ++j) {
    float z = b1[j];
    const float* row = w1 + size_t(j) * shape_.inputs;
    for (int i = 0; i < shape_.inputs; ++i) z += row[i] * x[i];
    hidden[j] = std::tanh(z);
    out += w2[j] * hidden[j];
  }
  return out;
}

float Mlp::BatchGradient(const float* params, const float* xs, const float* ys, size_t n,
                         float* grad) const {
  const int in = shape_.inputs;
  const int hid = shape_.hidden;
  const float* w2 = params + w2_offset();
  float* g_w1 = grad + w1_offset();
  float* g_b1 = grad + b1_offset();
  float* g_w2 = grad + w2_offset();
  float* g_b2 = grad + b2_offset();
  std::memset(grad, 0, num_params() * sizeof(float));
  std::vector<float> hidden(hid);
  float loss = 0.0f;
  for (size_t s = 0; s < n; ++s) {
    const float* x = xs + s * in;
    const float err = Forward(params, x, hidden.data()) - ys[s];
    loss += 0.5f * err * err;
    *g_b2 += err;
    for (int j = 0; j < hid; ++j) {
      g_w2[j] += err * hidden[j];
      // d tanh(z) / dz = 1 - tanh(z)^2.
      const float dz = err * w2[j] * (1.0f - hidden[j] * hidden[j]);
      g_b1[j] += dz;
      float* row = g_w1 + size_t(j) * in;
      for (int i = 0; i < in; ++i) row[i] += dz * x[i];
    }
  }
  const float inv_n = 1.0f / static_cast<float>(n);
  for (size_t i = 0; i < num_params(); ++i) grad[i] *= inv_n;
  return loss * inv_n;
}

void SgdStep(const SgdMomentum& sgd, size_t n, const float* grad, float* velocity, float* params) {
  for (size_t i = 0; i < n; ++i) {
    velocity[i] = sgd.momentum * velocity[i] + grad[i];
    params[i] -= sgd.lr * velocity[i];
  }
}

uint64_t Rng::Next() {
  state_ += 0x9e3779b97f4a7c15ull;
  return storage::Mix64(state_);
}

float Rng::Uniform() {
  // 24 bits: exactly representable in float, so the mapping involves no rounding.
  const float u = static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f);
  return 2.0f * u - 1.0f;
}

Teacher::Teacher(int inputs, uint64_t seed) : inputs_(inputs), w_(kUnits * inputs), a_(kUnits) {
  Rng rng(storage::Mix64(seed ^ 0x7465616368657221ull));  // "teacher!"
  const float s = 2.0f / std::sqrt(static_cast<float>(inputs));
  for (float& w : w_) w = s * rng.Uniform();
  for (float& a : a_) a = rng.Uniform();
}

float Teacher::Decode(std::string_view bytes, float* x) const {
  for (int i = 0; i < inputs_; ++i) {
    x[i] = (static_cast<float>(static_cast<uint8_t>(bytes[i])) - 127.5f) / 127.5f;
  }
  float y = 0.0f;
  for (int k = 0; k < kUnits; ++k) {
    float z = 0.0f;
    for (int i = 0; i < inputs_; ++i) z += w_[size_t(k) * inputs_ + i] * x[i];
    y += a_[k] * std::tanh(z);
  }
  return y;
}

}  // namespace railyard::train_example
