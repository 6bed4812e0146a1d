// examples/train: the MLP's gradient against finite differences, and the trainer across real
// rank processes: a run with a rank SIGKILLed mid-way and restarted from its checkpoint ends
// with the same weights, byte for byte, as an uninterrupted run.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "examples/train/mlp.h"
#include "railyard/base/hmac.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/launch/progress.h"

namespace railyard::train_example {
namespace {

// ---- The math ----

TEST(MlpTest, GradientMatchesFiniteDifferences) {
  const Mlp mlp({.inputs = 3, .hidden = 4});
  std::vector<float> params(mlp.num_params());
  mlp.Init(7, params.data());
  Rng rng(99);
  // Non-zero biases, so their gradients are exercised away from the initial point.
  for (size_t i = mlp.b1_offset(); i < mlp.w2_offset(); ++i) params[i] = 0.3f * rng.Uniform();
  params[mlp.b2_offset()] = 0.1f;
  const size_t n = 5;
  std::vector<float> xs(n * 3), ys(n);
  for (float& x : xs) x = rng.Uniform();
  for (float& y : ys) y = rng.Uniform();
  std::vector<float> grad(mlp.num_params());
  mlp.BatchGradient(params.data(), xs.data(), ys.data(), n, grad.data());

  // Central differences of the batch loss, in double from the float forward pass.
  auto loss_at = [&](const std::vector<float>& p) {
    std::vector<float> hidden(4);
    double sum = 0;
    for (size_t s = 0; s < n; ++s) {
      double e = mlp.Forward(p.data(), xs.data() + s * 3, hidden.data()) - ys[s];
      sum += 0.5 * e * e;
    }
    return sum / n;
  };
  const float h = 1e-2f;
  for (size_t i = 0; i < mlp.num_params(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += h;
    minus[i] -= h;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (double(plus[i]) - minus[i]);
    EXPECT_NEAR(grad[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "parameter " << i;
  }
}

TEST(MlpTest, BatchGradientReturnsTheMeanLossAndIsRepeatable) {
  const Mlp mlp({.inputs = 8, .hidden = 16});
  std::vector<float> params(mlp.num_params());
  mlp.Init(1, params.data());
  Rng rng(5);
  std::vector<float> xs(4 * 8), ys(4);
  for (float& x : xs) x = rng.Uniform();
  for (float& y : ys) y = rng.Uniform();
  std::vector<float> g1(mlp.num_params()), g2(mlp.num_params()), hidden(16);
  const float loss = mlp.BatchGradient(params.data(), xs.data(), ys.data(), 4, g1.data());
  EXPECT_EQ(mlp.BatchGradient(params.data(), xs.data(), ys.data(), 4, g2.data()), loss);
  EXPECT_EQ(g1, g2);  // bit for bit
  double want = 0;
  for (int s = 0; s < 4; ++s) {
    double e = mlp.Forward(params.data(), xs.data() + s * 8, hidden.data()) - ys[s];
    want += 0.5 * e * e / 4;
  }
  EXPECT_NEAR(loss, want, 1e-6);
}

TEST(MlpTest, SgdStepWithMomentum) {
  std::vector<float> grad = {1.0f, -2.0f}, velocity = {0.5f, 0.0f}, params = {1.0f, 1.0f};
  SgdStep({.lr = 0.1f, .momentum = 0.9f}, 2, grad.data(), velocity.data(), params.data());
  EXPECT_FLOAT_EQ(velocity[0], 0.9f * 0.5f + 1.0f);
  EXPECT_FLOAT_EQ(velocity[1], -2.0f);
  EXPECT_FLOAT_EQ(params[0], 1.0f - 0.1f * 1.45f);
  EXPECT_FLOAT_EQ(params[1], 1.0f + 0.2f);
}

TEST(MlpTest, TrainingLowersTheLossOnTheTeacherTask) {
  const Mlp mlp({.inputs = 8, .hidden = 16});
  const Teacher teacher(8, 3);
  std::vector<float> params(mlp.num_params()), velocity(mlp.num_params()), grad(mlp.num_params());
  mlp.Init(3, params.data());
  Rng rng(11);
  std::vector<float> xs(32 * 8), ys(32);
  std::string bytes(8, '\0');
  for (int s = 0; s < 32; ++s) {
    for (char& b : bytes) b = static_cast<char>(rng.Next());
    ys[s] = teacher.Decode(bytes, xs.data() + s * 8);
  }
  const float first = mlp.BatchGradient(params.data(), xs.data(), ys.data(), 32, grad.data());
  float last = first;
  for (int step = 0; step < 200; ++step) {
    last = mlp.BatchGradient(params.data(), xs.data(), ys.data(), 32, grad.data());
    SgdStep({.lr = 0.05f, .momentum = 0.9f}, mlp.num_params(), grad.data(), velocity.data(),
            params.data());
  }
  EXPECT_LT(last, first * 0.5f) << "first " << first << " last " << last;
}

// ---- Ranks as processes ----

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TrainExampleTest : public ::testing::Test {
 protected:
  // Starts `world` ranks the way `railyard bench comm` does (rank 0 serves a TcpStore on a
  // free loopback port, a fresh secret), waits for all, and returns how each ended.
  std::vector<base::ExitInfo> RunGang(int world, const std::vector<std::string>& args,
                                      int restart_count, const std::string& progress = "") {
    const int port = FreePort();
    const std::string secret = base::ToHex(base::RandomBytes(16));
    std::vector<base::Child> children;
    for (int r = 0; r < world; ++r) {
      base::SpawnOptions s;
      s.argv = {RAILYARD_TRAIN_BINARY};
      s.argv.insert(s.argv.end(), args.begin(), args.end());
      s.env = {{"RAILYARD_RANK", std::to_string(r)},
               {"RAILYARD_WORLD_SIZE", std::to_string(world)},
               {"RAILYARD_STORE", "127.0.0.1:" + std::to_string(port)},
               {"RAILYARD_JOB_SECRET", secret},
               {"RAILYARD_JOB_ID", "train-test"},
               {"RAILYARD_TRANSPORT", "tcp"},
               {"RAILYARD_SOCKET_IFNAME", "=lo"},
               {"RAILYARD_COMM_TIMEOUT", "20s"},
               {"RAILYARD_RESTART_COUNT", std::to_string(restart_count)}};
      if (r == 0) s.env.push_back({"RAILYARD_STORE_SERVE", "1"});
      if (!progress.empty()) s.env.push_back({"RAILYARD_PROGRESS", progress});
      auto child = base::Child::Spawn(s);
      EXPECT_TRUE(child.ok()) << child.status().ToString();
      if (!child.ok()) return {};
      children.push_back(std::move(*child));
    }
    std::vector<base::ExitInfo> exits;
    for (auto& c : children) {
      auto e = c.Wait(base::Deadline::After(std::chrono::seconds(90)));
      EXPECT_TRUE(e.ok()) << e.status().ToString();
      exits.push_back(e.ok() ? *e : c.KillAndReap());
    }
    return exits;
  }

  std::vector<std::string> Args(const std::string& ckpt, const std::string& out) {
    return {
        "--steps",    "40", "--ckpt-every", "10", "--batch", "8", "--data", tmp_.path() + "/data",
        "--ckpt-dir", ckpt, "--out",        out,  "--seed",  "42"};
  }

  // Runs `world` ranks uninterrupted (A), then again with `victim` SIGKILLed before step 25
  // on the first attempt and the gang restarted (B); B must resume from `resume_step` (20,
  // the newest checkpoint, unless `between` damaged it) and end with A's weights, byte for
  // byte. `between` runs on B's checkpoint directory before the restart.
  void KillAndResume(int world, int victim,
                     const std::function<void(const std::string&)>& between = nullptr,
                     int resume_step = 20) {
    ASSERT_FALSE(tmp_.path().empty());
    const std::string out_a = tmp_.path() + "/a.bin";
    // Run A reports its progress as under the launcher. Nobody drains the socket while it
    // runs, and the kernel queues only the first few datagrams (net.unix.max_dgram_qlen,
    // 10 by default) and drops the rest, as the wire allows: those are each rank's start-up
    // heartbeats and its first steps (a rank cannot finish step k before every rank has
    // finished step k-1, whose allreduce it needs).
    launch::ProgressListenerOptions po;
    po.world_size = world;
    auto listener = launch::ProgressListener::Bind(tmp_.path() + "/progress.sock", po);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    auto a = RunGang(world, Args(tmp_.path() + "/ckpt-a", out_a), 0, (*listener)->path());
    ASSERT_EQ(a.size(), size_t(world));
    for (const auto& e : a) ASSERT_TRUE(e.Succeeded()) << e.stdout_text << e.stderr_text;
    // The datagrams are queued in the socket already; drain them.
    while (true) {
      auto got = (*listener)->Poll(base::Deadline::After(std::chrono::milliseconds(0)));
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      if (*got == 0) break;
    }
    EXPECT_EQ((*listener)->malformed(), 0u) << (*listener)->last_malformed();
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE((*listener)->ranks()[r].heard) << "rank " << r;
      EXPECT_GE((*listener)->ranks()[r].last_step, 1) << "rank " << r;
    }
    EXPECT_NE(a[0].stdout_text.find("starting at step 0"), std::string::npos) << a[0].stdout_text;
    EXPECT_NE(a[0].stdout_text.find("final weights xxh3"), std::string::npos) << a[0].stdout_text;

    const std::string ckpt_b = tmp_.path() + "/ckpt-b", out_b = tmp_.path() + "/b.bin";
    std::vector<std::string> args = Args(ckpt_b, out_b);
    args.insert(args.end(),
                {"--fail-at-step-for-test", "25", "--fail-rank-for-test", std::to_string(victim)});
    auto first = RunGang(world, args, 0);
    ASSERT_EQ(first.size(), size_t(world));
    for (int r = 0; r < world; ++r) {
      const auto& e = first[r];
      if (r == victim) {
        EXPECT_EQ(e.signal, SIGKILL) << e.stdout_text << e.stderr_text;
        continue;
      }
      // The survivors fail, naming the rank that died.
      EXPECT_FALSE(e.Succeeded()) << e.stdout_text;
      EXPECT_NE(e.stderr_text.find("rank " + std::to_string(victim)), std::string::npos)
          << "rank " << r << ": " << e.stderr_text;
    }
    EXPECT_FALSE(std::filesystem::exists(out_b));
    if (between) between(ckpt_b);

    auto second = RunGang(world, args, 1);
    ASSERT_EQ(second.size(), size_t(world));
    for (const auto& e : second) {
      ASSERT_TRUE(e.Succeeded()) << e.stdout_text << e.stderr_text;
      EXPECT_NE(e.stdout_text.find("resumed from step " + std::to_string(resume_step)),
                std::string::npos)
          << e.stdout_text;
    }

    const std::string wa = ReadAll(out_a), wb = ReadAll(out_b);
    ASSERT_FALSE(wa.empty());
    EXPECT_EQ(wa.size() % sizeof(float), 0u);
    EXPECT_TRUE(wa == wb) << "the resumed run's final weights differ from the uninterrupted run's";
    EXPECT_EQ(ReadAll(out_a + ".xxh3").substr(0, 16), ReadAll(out_b + ".xxh3").substr(0, 16));
  }

  base::ScopedTempDir tmp_{"train-example"};
};

TEST_F(TrainExampleTest, KilledRankResumesBitIdentically) { KillAndResume(2, 1); }

// Three ranks: the ring's summation chain has more than two operands, so a change in its
// order between runs would show in the weights.
TEST_F(TrainExampleTest, ThreeRanksKilledMiddleRankResumesBitIdentically) { KillAndResume(3, 1); }

// The newest checkpoint is corrupt in every replica: the restart falls back to the one before
// it, and still ends bit-identical (it only redoes more steps).
TEST_F(TrainExampleTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  auto corrupt_step_20 = [](const std::string& ckpt) {
    for (const char* shard : {"rank-00000.bin", "rank-00001.bin"}) {
      const std::string path = ckpt + "/step-00000020/" + shard;
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      ASSERT_TRUE(f.good()) << path;
      char c = 0;
      f.seekg(100);
      f.get(c);
      f.seekp(100);
      f.put(static_cast<char>(c ^ 0x40));
    }
  };
  KillAndResume(2, 0, corrupt_step_20, 10);
}

}  // namespace
}  // namespace railyard::train_example
