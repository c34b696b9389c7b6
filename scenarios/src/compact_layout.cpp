// The compact layout spelling of search and plan tables ("tp8 cp1 pp16(7/7) dp2 mbs1 full
// 1f1b fp8-delayed"; a cp_comm_type other than p2p in parentheses, "cp4(a2a)", hierarchical CP
// with its two levels, "cp8(a2a2+p2p4)") and its reading as --layout key=value pairs.

#include "tetra/scenarios/compact_layout.hpp"

#include <charconv>
#include <string>
#include <vector>

#include "tetra/base/error.hpp"

namespace tetra::scenarios {

std::string cp_exchange(const parallel::Layout& l) {
  if (l.cp <= 1 || l.cp_comm == parallel::CpComm::p2p) return "";
  if (l.cp_comm == parallel::CpComm::a2a_p2p) {
    return "a2a" + std::to_string(l.cp_a2a) + "+p2p" + std::to_string(l.cp_ring());
  }
  return to_string(l.cp_comm);
}

std::string compact_layout(const parallel::Layout& l, const parallel::Fp8Training& fp8, bool compile) {
  std::string s = "tp" + std::to_string(l.tp) + " cp" + std::to_string(l.cp);
  if (const std::string x = cp_exchange(l); !x.empty()) s += "(" + x + ")";
  s += " pp" + std::to_string(l.pp);
  if (l.first_stage_layers > 0 || l.last_stage_layers > 0) {
    s += "(" + std::to_string(l.first_stage_layers) + "/" + std::to_string(l.last_stage_layers) + ")";
  }
  s += " dp" + std::to_string(l.dp);
  if (l.dp_replicate > 1) s += "(" + std::to_string(l.shard_dp()) + "x" + std::to_string(l.dp_replicate) + ")";
  if (l.vp > 1) s += " vp" + std::to_string(l.vp);
  s += " mbs" + std::to_string(l.mbs);
  if (l.tp > 1 && !l.sp) s += " no-sp";
  if (l.ep > 1) s += " ep" + std::to_string(l.ep);
  if (l.etp > 1) s += " etp" + std::to_string(l.etp);
  if (l.recompute != parallel::Recompute::none) s += std::string(" ") + to_string(l.recompute);
  if (l.recompute == parallel::Recompute::selective_layer) s += "/" + std::to_string(l.ac_freq);
  if (l.offload_layers > 0) s += " offload" + std::to_string(l.offload_layers);
  s += std::string(" ") + to_string(l.schedule);
  if (l.rank_order != parallel::Layout{}.rank_order) s += " " + l.rank_order;
  if (fp8.enabled()) s += std::string(" fp8-") + to_string(fp8.recipe);
  if (compile) s += " compiled";
  return s;
}

namespace {

/// `text` as a whole number >= 0, or -1.
long long whole(std::string_view text) {
  long long v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() && v >= 0 ? v : -1;
}

[[noreturn]] void refuse(std::string_view token, const std::string& why) {
  throw UserError(SourceLocation{"--layout"}, std::string(token), why);
}

/// "16(7/7)" or "8(4x2)": the number and the two numbers in parentheses joined by `sep`.
struct Sized {
  long long n = -1, a = -1, b = -1;
};
Sized sized(std::string_view token, std::string_view body, char sep) {
  Sized out;
  const auto open = body.find('(');
  out.n = whole(body.substr(0, open));
  if (open == std::string_view::npos) return out;
  if (body.back() != ')') refuse(token, "expected a closing ')'");
  const std::string_view inner = body.substr(open + 1, body.size() - open - 2);
  const auto at = inner.find(sep);
  if (at == std::string_view::npos) refuse(token, std::string("expected two numbers joined by '") + sep + "'");
  out.a = whole(inner.substr(0, at));
  out.b = whole(inner.substr(at + 1));
  if (out.a < 0 || out.b < 0) refuse(token, "expected whole numbers in the parentheses");
  return out;
}

}  // namespace

std::optional<CompactLayoutKeys> expand_compact_layout(std::string_view text) {
  if (text.find('=') != std::string_view::npos) return std::nullopt;
  std::vector<std::string> layout, training;
  bool no_sp = false;
  long long tp = 1;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == ',') {
      ++i;
      continue;
    }
    const std::size_t end = std::min(text.find_first_of(" ,", i), text.size());
    const std::string_view t = text.substr(i, end - i);
    i = end;
    auto number = [&](std::string_view prefix, const char* key) {
      const long long v = whole(t.substr(prefix.size()));
      if (v < 0) {
        refuse(t, std::string("expected key=value, or a whole number after '") + std::string(prefix) +
                      "' as search prints it (" + std::string(prefix) + "8)");
      }
      layout.push_back(std::string(key) + "=" + std::to_string(v));
      return v;
    };
    const bool rank_order = t.find('-') != std::string_view::npos && t != "no-sp" && t.rfind("fp8-", 0) != 0 &&
                            !parallel::parse_schedule(t);
    if (rank_order) {
      // A rank order ("tp-cp-pp-dp"); the layout reader checks the spelling.
      layout.push_back("rank_order=" + std::string(t));
    } else if (t.rfind("offload", 0) == 0) {
      number("offload", "offload_layers");
    } else if (t.rfind("etp", 0) == 0) {
      number("etp", "etp");
    } else if (t.rfind("mbs", 0) == 0) {
      number("mbs", "mbs");
    } else if (t.rfind("tp", 0) == 0) {
      tp = number("tp", "tp");
    } else if (t.rfind("cp", 0) == 0) {
      // cp<ranks> or cp<ranks>(<cp_comm_type>); the layout reader checks the name.
      const std::size_t open = t.find('(');
      if (open == std::string_view::npos) {
        number("cp", "cp");
      } else {
        if (t.back() != ')' || open + 2 > t.size() - 1) refuse(t, "expected cp<ranks> or cp<ranks>(<cp_comm_type>)");
        const long long v = whole(t.substr(2, open - 2));
        if (v < 0) refuse(t, "expected a whole number after 'cp' as search prints it (cp4 or cp4(a2a))");
        layout.push_back("cp=" + std::to_string(v));
        const std::string_view comm = t.substr(open + 1, t.size() - open - 2);
        // Hierarchical CP with its levels: a2a<ranks>+p2p<ranks>.
        const auto plus = comm.find("+p2p");
        if (comm.rfind("a2a", 0) == 0 && plus != std::string_view::npos && plus > 3) {
          const long long a = whole(comm.substr(3, plus - 3));
          const long long r = whole(comm.substr(plus + 4));
          if (a < 0 || r < 0) {
            refuse(t, "expected cp<ranks>(a2a<ranks>+p2p<ranks>) as search prints it (cp8(a2a2+p2p4))");
          }
          if (a == 0 || r == 0 || v % a != 0 || v / a != r) {
            refuse(t, "the two levels a2a" + std::to_string(a) + " and p2p" + std::to_string(r) +
                          " do not multiply to cp=" + std::to_string(v));
          }
          layout.push_back("cp_comm_type=a2a+p2p");
          layout.push_back("cp_a2a=" + std::to_string(a));
        } else {
          layout.push_back("cp_comm_type=" + std::string(comm));
        }
      }
    } else if (t.rfind("vp", 0) == 0) {
      number("vp", "vp");
    } else if (t.rfind("ep", 0) == 0) {
      number("ep", "ep");
    } else if (t.rfind("pp", 0) == 0 || t.rfind("dp", 0) == 0) {
      // pp<stages>(<first>/<last>) or dp<ranks>(<shard>x<replicas>).
      const bool pp = t[0] == 'p';
      const Sized s = sized(t, t.substr(2), pp ? '/' : 'x');
      if (s.n < 0) {
        refuse(t, pp ? "expected pp<stages> or pp<stages>(<first>/<last>)"
                     : "expected dp<ranks> or dp<ranks>(<shard>x<replicas>)");
      }
      layout.push_back(std::string(pp ? "pp=" : "dp=") + std::to_string(s.n));
      if (pp && s.a >= 0) {
        layout.push_back("first_stage_layers=" + std::to_string(s.a));
        layout.push_back("last_stage_layers=" + std::to_string(s.b));
      }
      if (!pp && s.b >= 0) layout.push_back("dp_replicate=" + std::to_string(s.b));
    } else if (t == "no-sp") {
      no_sp = true;
    } else if (t == "compiled") {
      training.emplace_back("compile=true");
    } else if (t.rfind("fp8-", 0) == 0) {
      training.emplace_back("precision=fp8");
      training.push_back("fp8_recipe=" + std::string(t.substr(4)));
    } else if (t.rfind("selective_layer/", 0) == 0) {
      layout.emplace_back("recompute=selective_layer");
      number("selective_layer/", "ac_freq");
    } else if (parallel::parse_recompute(t)) {
      layout.push_back("recompute=" + std::string(t));
    } else if (parallel::parse_schedule(t)) {
      layout.push_back("schedule=" + std::string(t));
    } else {
      refuse(t, "unknown layout word (expected key=value pairs, or the form search and plan print: "
                "tp8 cp2(a2a) pp16(7/7) dp2 vp2 mbs1 no-sp ep8 etp1 full offload2 1f1b tp-cp-pp-dp fp8-delayed compiled)");
    }
  }
  layout.push_back(std::string("sp=") + (tp > 1 && !no_sp ? "true" : "false"));
  CompactLayoutKeys out;
  for (const auto& kv : layout) out.layout += (out.layout.empty() ? "" : ",") + kv;
  for (const auto& kv : training) out.training += (out.training.empty() ? "" : ",") + kv;
  return out;
}

}  // namespace tetra::scenarios
