// `railyard probe sink|send`: the TCP throughput probe the demo and the virtual-cluster
// tests run on virtual hosts.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/vcluster/link_probe.h"

namespace railyard::cli {

void RegisterProbeCommand(CLI::App& app, Action* action) {
  CLI::App* probe = app.add_subcommand(
      "probe", "TCP throughput probe between hosts: a sink that counts bytes and a timed sender");
  probe->require_subcommand(1);
  probe->footer(
      "Examples:\n"
      "  railyard vcluster exec node1 -- railyard probe sink --listen 198.18.0.2:5201 &\n"
      "  railyard vcluster exec node0 -- railyard probe send --to 198.18.0.2:5201 --time 1s\n"
      "Docs: docs/probe.md\n");

  struct SinkFlags {
    std::string listen = "0.0.0.0:5201";
    std::string lifetime = "60s";
  };
  auto sf = std::make_shared<SinkFlags>();
  CLI::App* sink = probe->add_subcommand(
      "sink", "Accept connections and count bytes; prints 'ready ADDR:PORT' once listening");
  sink->add_option("--listen", sf->listen, "ADDRESS:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  sink->add_option("--for", sf->lifetime, "exit after this long")->capture_default_str();
  sink->callback([sf, action] {
    *action = [sf]() -> Outcome {
      vcluster::SinkOptions o;
      if (Status s = base::SplitHostPort(sf->listen, &o.address, &o.port); !s.ok()) {
        return s.WithContext("--listen");
      }
      auto life = base::ParseDuration(sf->lifetime);
      if (!life.ok()) return life.status().WithContext("--for");
      o.lifetime = *life;
      return vcluster::RunSink(o, [](const std::string& where) {
        fmt::print("ready {}\n", where);
        std::fflush(stdout);
      });
    };
  });

  struct SendFlags {
    std::string to;
    std::string time = "1s";
    std::string timeout = "30s";
    bool json = false;
  };
  auto tf = std::make_shared<SendFlags>();
  CLI::App* send = probe->add_subcommand(
      "send", "Stream to a sink for a fixed time and print the rate the sink measured");
  send->add_option("--to", tf->to, "ADDRESS:PORT of a running sink")->required();
  send->add_option("--time", tf->time, "how long to stream")->capture_default_str();
  send->add_option("--timeout", tf->timeout, "give up when the whole exchange takes longer")
      ->capture_default_str();
  send->add_flag("--json", tf->json,
                 "print {\"bytes\", \"seconds\", \"bits_per_second\"} instead of a line");
  send->callback([tf, action] {
    *action = [tf]() -> Outcome {
      std::string address;
      uint16_t port = 0;
      if (Status s = base::SplitHostPort(tf->to, &address, &port); !s.ok()) {
        return s.WithContext("--to");
      }
      auto t = base::ParseDuration(tf->time);
      if (!t.ok()) return t.status().WithContext("--time");
      auto limit = base::ParseDuration(tf->timeout);
      if (!limit.ok()) return limit.status().WithContext("--timeout");
      auto r = vcluster::RunSend(address, port, *t, base::Deadline::After(*limit));
      if (!r.ok()) return r.status();
      if (tf->json) {
        nlohmann::json j = {{"bytes", r->bytes},
                            {"seconds", r->seconds},
                            {"bits_per_second", r->bits_per_second()}};
        fmt::print("{}\n", j.dump());
      } else {
        fmt::print("{} in {:.3f}s: {}\n", base::FormatBytes(r->bytes), r->seconds,
                   base::FormatRateBits(r->bits_per_second()));
      }
      return Status::Ok();
    };
  });
}

}  // namespace railyard::cli
