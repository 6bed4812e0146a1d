// The example trainer's model: a two-layer perceptron (inputs -> tanh hidden -> one output)
// trained by mean squared error, with plain SGD with momentum, its math written out in float.
//
//   Mlp mlp({.inputs = 32, .hidden = 64});
//   std::vector<float> params(mlp.num_params()), grad(mlp.num_params());
//   mlp.Init(seed, params.data());
//   float loss = mlp.BatchGradient(params.data(), xs.data(), ys.data(), n, grad.data());
//   SgdStep({.lr = 0.05f, .momentum = 0.9f}, n_params, grad.data(), velocity.data(), params);
//
// Determinism: every sum runs in one fixed order (samples in batch order, then the elements
// of each dot product in index order), with no threads and no reassociation, so the same
// inputs give the same bits on every call and every rank. That is what lets the trainer's
// result after restarts be compared byte for byte with an uninterrupted run.
//
// The parameters are one flat float vector: w1 [hidden x inputs] (row-major), b1 [hidden],
// w2 [hidden], b2 [1]; the *_offset() accessors say where each starts.
//
// Thread-safety: an Mlp is immutable; its methods may be called concurrently on distinct
// output buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace railyard::train_example {

struct MlpShape {
  int inputs = 32;
  int hidden = 64;
};

class Mlp {
 public:
  explicit Mlp(MlpShape shape);

  const MlpShape& shape() const { return shape_; }
  size_t num_params() const { return b2_offset() + 1; }
  size_t w1_offset() const { return 0; }
  size_t b1_offset() const { return size_t(shape_.hidden) * shape_.inputs; }
  size_t w2_offset() const { return b1_offset() + shape_.hidden; }
  size_t b2_offset() const { return w2_offset() + shape_.hidden; }

  // Weights uniform in +-1/sqrt(fan_in) from a stream keyed by `seed`; biases zero.
  void Init(uint64_t seed, float* params) const;

  // The prediction for one sample `x` (inputs floats); `hidden` (hidden floats) receives
  // the hidden activations.
  float Forward(const float* params, const float* x, float* hidden) const;

  // Sets `grad` (num_params floats) to the gradient of the mean over the n samples of
  // 0.5 * (prediction - y)^2, and returns that mean loss. xs holds n * inputs floats, ys n.
  // Precondition: n >= 1.
  float BatchGradient(const float* params, const float* xs, const float* ys, size_t n,
                      float* grad) const;

 private:
  MlpShape shape_;
};

struct SgdMomentum {
  float lr = 0.05f;
  float momentum = 0.9f;
};

// velocity = momentum * velocity + grad; params -= lr * velocity (n elements each).
void SgdStep(const SgdMomentum& sgd, size_t n, const float* grad, float* velocity, float* params);

// A SplitMix64 stream: its whole state is one integer, saved in checkpoints as text.
class Rng {
 public:
  explicit Rng(uint64_t state) : state_(state) {}
  uint64_t Next();
  float Uniform();  // in [-1, 1), from the top 24 bits
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// The synthetic task. A sample is `inputs` bytes (storage's synthetic data, packed); byte i
// becomes feature (b - 127.5) / 127.5, and the target is a fixed random "teacher" network of
// those features, so the data set is a reproducible regression problem.
class Teacher {
 public:
  Teacher(int inputs, uint64_t seed);
  // Decodes one sample's bytes into `x` (inputs floats) and returns its target.
  // Precondition: bytes.size() == inputs.
  float Decode(std::string_view bytes, float* x) const;

 private:
  static constexpr int kUnits = 4;
  int inputs_;
  std::vector<float> w_;  // kUnits x inputs
  std::vector<float> a_;  // kUnits
};

}  // namespace railyard::train_example
