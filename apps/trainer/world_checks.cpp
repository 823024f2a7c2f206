#include "world_checks.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <vector>

namespace trainer::cli {

namespace {

/// Every process's text, each after its host and '\n'.
struct Gathered {
  std::vector<std::string> all;
  std::string host(size_t r) const { return all[r].substr(0, all[r].find('\n')); }
  std::string text(size_t r) const { return all[r].substr(all[r].find('\n') + 1); }
  std::string process(size_t r) const { return "rank " + std::to_string(r) + " (host " + host(r) + ")"; }
};

Gathered gather(ProcessGroup& world, const std::string& text) { return {world.all_gather(world.host() + "\n" + text)}; }

/// node in one style, so that the same settings written in flow or block style compare equal.
void block_style(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Block);
  if (node.IsMap())
    for (auto it = node.begin(); it != node.end(); ++it) block_style(it->second);
  else if (node.IsSequence())
    for (auto it = node.begin(); it != node.end(); ++it) block_style(*it);
}

/// The settings of config that every process must share, as YAML text.
std::string shared_settings(const Config& config, bool resumes) {
  YAML::Node root = YAML::Load(config.text);
  for (const char* key : {"images", "masks", "validation_images", "validation_masks", "loader_threads"})
    if (root["data"].IsMap()) root["data"].remove(key);
  if (YAML::Node t = root["training"]; t.IsMap()) {
    t.remove("output_dir");
    if (t["initial_weights"].IsMap())
      t["initial_weights"].remove("filepath");
    else if (t["initial_weights"])
      t["initial_weights"] = "given";
  }
  root["--resume"] = resumes ? "given" : "not given";
  block_style(root);
  return YAML::Dump(root);
}

/// The first setting (a dotted key) where a and b differ, and each one's value there ("not given" when missing).
struct Difference {
  std::string key, a, b;
};
bool first_difference(const YAML::Node& a, const YAML::Node& b, const std::string& key, Difference& out) {
  if (a && b && a.IsMap() && b.IsMap()) {  // (a missing key's node is invalid: tested first)
    for (const YAML::Node* side : {&a, &b})
      for (auto it = side->begin(); it != side->end(); ++it) {
        const std::string name = it->first.as<std::string>();
        if (first_difference(a[name], b[name], key.empty() ? name : key + "." + name, out)) return true;
      }
    return false;
  }
  const auto text = [](const YAML::Node& n) {
    if (!n) return std::string("not given");
    YAML::Emitter e;
    e << YAML::Flow << n;
    return std::string(e.c_str());
  };
  if (text(a) == text(b)) return false;
  out = {key, text(a), text(b)};
  return true;
}

}  // namespace

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (const char c : bytes) h = (h ^ uint64_t(static_cast<unsigned char>(c))) * 1099511628211ull;
  return h;
}

void require_same_settings(ProcessGroup& world, const Config& config, bool resumes) {
  const Gathered g = gather(world, shared_settings(config, resumes));
  for (size_t r = 1; r < g.all.size(); ++r) {
    if (g.text(r) == g.text(0)) continue;
    Difference d{"the settings", "", ""};
    first_difference(YAML::Load(g.text(r)), YAML::Load(g.text(0)), "", d);
    throw_alike(&world, d.key + " is " + d.a + " on " + g.process(r) + ", " + d.b + " on " + g.process(0) +
                            ": every process of a run must train with the same config and flags (" + config.path +
                            " on rank 0; only the data folders, data.loader_threads, training.output_dir and the "
                            "paths of --resume and initial_weights may differ)");
  }
}

void require_same_file(ProcessGroup& world, const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = fnv1a({});
  size_t size = 0;
  std::string chunk(1 << 20, '\0');
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
    h = fnv1a(std::string_view(chunk.data(), size_t(in.gcount())), h);
    size += size_t(in.gcount());
  }
  const bool read = in.is_open() && !in.bad();
  const Gathered g = gather(world, (read ? std::to_string(size) + " " + std::to_string(h) : "unreadable") + "\n" + path);
  const auto digest = [&](size_t r) { return g.text(r).substr(0, g.text(r).find('\n')); };
  const auto path_of = [&](size_t r) { return g.text(r).substr(g.text(r).find('\n') + 1); };
  for (size_t r = 0; r < g.all.size(); ++r) {
    if (digest(r) == "unreadable")
      throw_alike(&world, g.process(r) + " could not read '" + path_of(r) + "' (" + what +
                              ") again after loading it: every process of a run reads it; check the file on that "
                              "host");
    if (r > 0 && digest(r) != digest(0))
      throw_alike(&world, g.process(r) + " read other contents at '" + path_of(r) + "' (" + what + ") than " +
                              g.process(0) + " at '" + path_of(0) +
                              "': every process of a run must read the same checkpoint (a shared file system, or "
                              "identical copies)");
  }
}

}  // namespace trainer::cli
