#include "keras/keras_order.h"

#include <algorithm>
#include <map>

#include "config/sections.h"

namespace trainer {

namespace {

/// Depth-first from layer: its first-visit index (pre-order), then its inputs, then it joins post (post-order).
void walk(const std::vector<std::vector<int>>& inputs, int layer, std::vector<int>& first_visit,
          std::vector<char>& done, std::vector<int>& post, int& visits) {
  if (done[size_t(layer)]) return;
  if (first_visit[size_t(layer)] < 0) first_visit[size_t(layer)] = visits++;
  for (int in : inputs[size_t(layer)]) walk(inputs, in, first_visit, done, post, visits);
  done[size_t(layer)] = 1;
  post.push_back(layer);
}

}  // namespace

std::vector<int> keras_layer_order(const std::vector<std::vector<int>>& inputs, int output) {
  const size_t n = inputs.size();
  std::vector<int> first_visit(n, -1), post, depth(n, 0);
  std::vector<char> done(n, 0);
  int visits = 0;
  walk(inputs, output, first_visit, done, post, visits);
  // From the output back (reverse post-order is topological): each input lies one deeper than its reader.
  for (auto it = post.rbegin(); it != post.rend(); ++it)
    for (int in : inputs[size_t(*it)]) depth[size_t(in)] = std::max(depth[size_t(in)], depth[size_t(*it)] + 1);
  std::vector<int> order = post;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return depth[size_t(a)] != depth[size_t(b)] ? depth[size_t(a)] > depth[size_t(b)]
                                                : first_visit[size_t(a)] < first_visit[size_t(b)];
  });
  return order;
}

std::vector<std::string> keras_storage_names(const std::vector<std::string>& classes) {
  std::map<std::string, int> used;
  std::vector<std::string> names;
  for (const std::string& cls : classes) {
    const std::string base = keras_snake_case(cls);
    const auto [it, fresh] = used.emplace(base, 0);
    names.push_back(fresh ? base : base + "_" + std::to_string(++it->second));
  }
  return names;
}

}  // namespace trainer
