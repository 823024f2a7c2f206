// trainer import: Keras model configs (built here as JSON in Keras 3's and
// Keras 2's layouts) as trainer configs, Lambda functions read from their
// CPython bytecode, and every unsupported piece reported together. The same
// against real Keras files: tests/keras/roundtrip.sh.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <sstream>

#include "config/config.h"
#include "io/checkpoint.h"
#include "nn/model.h"
#include "keras/keras_export.h"
#include "keras/keras_import.h"
#include "keras/keras_order.h"
#include "keras/keras_layers.h"
#include "keras/python_lambda.h"
#include "process_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int k = 3; k >= 0; --k) out += abc[(v >> (6 * k)) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? abc[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string i32(int32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[size_t(k)] = char((uint32_t(v) >> (8 * k)) & 0xff);
  return s;
}

std::string short_ascii(const std::string& s) { return "z" + std::string(1, char(s.size())) + s; }

/// marshal.dumps of a CPython 3.8-3.10 code object of one argument x: argcount, posonlyargcount,
/// kwonlyargcount, nlocals, stacksize, flags, then bytecode, consts, names, varnames, freevars,
/// cellvars, filename, name, firstlineno, lnotab.
std::string code_310(const std::string& bytecode, const std::string& consts) {
  return "c" + i32(1) + i32(0) + i32(0) + i32(1) + i32(2) + i32(0x43) + "s" + i32(int32_t(bytecode.size())) +
         bytecode + consts + std::string(")\0", 2) + ")\x01" + short_ascii("x") + std::string(")\0", 2) +
         std::string(")\0", 2) + short_ascii("<string>") + short_ascii("<lambda>") + i32(1) + "s" + i32(0);
}

// marshal.dumps(f.__code__) in base64 of CPython 3.11.7 (as Keras's func_dump stores a Lambda's function).
const char* kDiv255 = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8wwAAACXAHwAZAF6CwAAUwCpAk7p/wAAAKkAqQHaAXhzAQAAACD6CDxzdHJpbmc++gg8bGFtYmRhPnIIAAAABQAAAHMKAAAAgACYIZhjmSeAAPMAAAAA";
const char* kCentre = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8xIAAACXAHwAZAF6CwAAZAJ6CgAAUwApA07nAAAAAADgX0DpAQAAAKkAqQHaAXhzAQAAACD6CDxzdHJpbmc++gg8bGFtYmRhPnIIAAAABQAAAHMOAAAAgACwcbg1sXnAMbF9gADzAAAAAA==";
const char* kTwice = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8wwAAACXAGQBfAB6BQAAUwApAk7pAgAAAKkAqQHaAXhzAQAAACD6CDxzdHJpbmc++gg8bGFtYmRhPnIHAAAABQAAAHMNAAAAgADQWVrQXV7RWV6AAPMAAAAA";
const char* kNegated = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8xIAAACXAGQBfAB6CgAAZAF6CwAAUwApAk7pgAAAAKkAqQHaAXhzAQAAACD6CDxzdHJpbmc++gg8bGFtYmRhPnIHAAAABQAAAHMnAAAAgADwAABmA2kD8AAAbANtA/EAAGYDbQPwAABxA3QD8QAAZQN0A4AA8wAAAAA=";
const char* kSquare = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8wwAAACXAHwAfAB6BQAAUwCpAU6pAKkB2gF4cwEAAAAg+gg8c3RyaW5nPvoIPGxhbWJkYT5yBwAAAAUAAABzDQAAAIAA0HR10Hh50XR5gADzAAAAAA==";
const char* kGlobal = "4wEAAAAAAAAAAAAAAAIAAAADAAAA8xYAAACXAHwAdAAAAAAAAAAAAAAAegUAAFMAqQFOKQHaAWupAdoBeHMBAAAAIPoIPHN0cmluZz76CDxsYW1iZGE+cgcAAAAFAAAAcxkAAACAAPAAAFECUgL1AABVAlYC8QAAUQJWAoAA8wAAAAA=";
const char* kCall = "4wEAAAAAAAAAAAAAAAMAAAADAAAA8yAAAACXAHQBAAAAAAAAAAAAAHwApgEAAKsBAAAAAAAAAABTAKkBTikB2gNhYnOpAdoBeHMBAAAAIPoIPHN0cmluZz76CDxsYW1iZGE+cgcAAAAFAAAAcyAAAACAAPUAAGoCbQLwAABuAm8C8QAAagJwAvQAAGoCcAKAAPMAAAAA";
const char* kTwoArgs = "4wIAAAAAAAAAAAAAAAIAAAADAAAA8wwAAACXAHwAZAF6CwAAUwCpAk7p/wAAAKkAKQLaAXjaAXlzAgAAACAg+gg8c3RyaW5nPvoIPGxhbWJkYT5yCAAAAAUAAABzGQAAAIAA8AAASwNMA/AAAE8DUgPxAABLA1IDgADzAAAAAA==";

}  // namespace

TEST_CASE("a Lambda's function is read as x * scale + offset from CPython 3.11 bytecode", "[keras]") {
  auto a = lambda_affine(kDiv255);  // lambda x: x / 255
  REQUIRE(a);
  CHECK(a->scale == Approx(1.0 / 255).epsilon(1e-15));
  CHECK(a->offset == 0);
  a = lambda_affine(kCentre);  // lambda x: x / 127.5 - 1
  REQUIRE(a);
  CHECK(a->scale == Approx(1 / 127.5).epsilon(1e-15));
  CHECK(a->offset == -1);
  a = lambda_affine(kTwice);  // lambda x: 2 * x
  REQUIRE(a);
  CHECK(a->scale == 2);
  a = lambda_affine(kNegated);  // lambda x: (128 - x) / 128
  REQUIRE(a);
  CHECK(a->scale == Approx(-1.0 / 128));
  CHECK(a->offset == 1);
  CHECK_FALSE(lambda_affine(kSquare));   // x * x
  CHECK_FALSE(lambda_affine(kGlobal));   // x * k, k a global
  CHECK_FALSE(lambda_affine(kCall));     // abs(x)
  CHECK_FALSE(lambda_affine(kTwoArgs));  // lambda x, y: x / 255
}

TEST_CASE("a Lambda's function is read from CPython 3.8-3.10 bytecode", "[keras]") {
  const std::string consts255 = std::string(")\x02N") + "i" + i32(255);
  // LOAD_FAST 0, LOAD_CONST 1, BINARY_TRUE_DIVIDE, RETURN_VALUE
  auto a = lambda_affine(base64(code_310(std::string("\x7c\x00\x64\x01\x1b\x00\x53\x00", 8), consts255)));
  REQUIRE(a);
  CHECK(a->scale == Approx(1.0 / 255).epsilon(1e-15));
  double half = 0.5;
  std::string bits(8, '\0');
  std::memcpy(bits.data(), &half, 8);
  // LOAD_FAST 0, LOAD_CONST 1 (0.5 as a binary float), BINARY_MULTIPLY, RETURN_VALUE
  a = lambda_affine(base64(code_310(std::string("\x7c\x00\x64\x01\x14\x00\x53\x00", 8), std::string(")\x02N") + "g" + bits)));
  REQUIRE(a);
  CHECK(a->scale == 0.5);
  // BINARY_MULTIPLY of x by x
  CHECK_FALSE(lambda_affine(base64(code_310(std::string("\x7c\x00\x7c\x00\x14\x00\x53\x00", 8), consts255))));
}

TEST_CASE("malformed Lambda code is refused without a crash", "[keras]") {
  const std::string good = *base64_decode(kDiv255);
  for (size_t cut = 0; cut < good.size(); ++cut) CHECK_FALSE(lambda_affine(base64(good.substr(0, cut))));
  std::string flipped = good;
  for (size_t i = 0; i < good.size(); ++i) {
    flipped[i] = char(~good[i]);
    (void)lambda_affine(base64(flipped));  // any answer, no crash
    flipped[i] = good[i];
  }
  CHECK_FALSE(lambda_affine("not base64 !"));
  CHECK_FALSE(lambda_affine(""));
}

namespace {

using json = KerasJson;

json keras_tensor(const std::string& from) {
  return {{"class_name", "__keras_tensor__"}, {"config", {{"keras_history", {from, 0, 0}}}}};
}

/// A Keras 3 layer entry of a Functional config, reading args (tensors or constants).
json layer3(const std::string& cls, const std::string& name, json config, json args,
            const std::string& module = "keras.layers") {
  config["name"] = name;
  config["trainable"] = true;
  config["dtype"] = {{"module", "keras"}, {"class_name", "DTypePolicy"}, {"config", {{"name", "float32"}}}};
  json nodes = json::array();
  if (!args.is_null()) nodes.push_back({{"args", args}, {"kwargs", json::object()}});
  return {{"module", module}, {"class_name", cls}, {"config", config}, {"name", name}, {"inbound_nodes", nodes}};
}

json initializer(const std::string& cls) {
  return {{"module", "keras.initializers"}, {"class_name", cls}, {"config", {{"seed", nullptr}}}};
}

json conv(int filters, int k, const std::string& activation, const std::string& init = "GlorotUniform") {
  return {{"filters", filters}, {"kernel_size", {k, k}}, {"strides", {1, 1}}, {"padding", "same"},
          {"data_format", "channels_last"}, {"dilation_rate", {1, 1}}, {"groups", 1}, {"activation", activation},
          {"use_bias", true}, {"kernel_initializer", initializer(init)}, {"bias_initializer", initializer("Zeros")},
          {"kernel_regularizer", nullptr}, {"kernel_constraint", nullptr}};
}

/// The seed notebook's network in small widths, as Keras 3's to_json() writes it.
json seed_model() {
  json layers = json::array();
  layers.push_back({{"module", "keras.layers"}, {"class_name", "InputLayer"},
                    {"config", {{"batch_shape", {nullptr, 32, 32, 3}}, {"dtype", "float32"}, {"name", "image"}}},
                    {"name", "image"}, {"inbound_nodes", json::array()}});
  layers.push_back(layer3("Lambda", "scale",
                          {{"function", {{"class_name", "__lambda__"}, {"config", {{"code", kDiv255}, {"closure", nullptr}}}}},
                           {"arguments", json::object()}},
                          json::array({keras_tensor("image")})));
  layers.push_back(layer3("Conv2D", "c1", conv(4, 3, "elu", "HeNormal"), json::array({keras_tensor("scale")})));
  layers.push_back(layer3("Dropout", "d1", {{"rate", 0.1}, {"seed", nullptr}, {"noise_shape", nullptr}},
                          json::array({keras_tensor("c1")})));
  layers.push_back(layer3("MaxPooling2D", "p1", {{"pool_size", {2, 2}}, {"strides", {2, 2}}, {"padding", "valid"}},
                          json::array({keras_tensor("d1")})));
  layers.push_back(layer3("BatchNormalization", "bn",
                          {{"axis", -1}, {"momentum", 0.99}, {"epsilon", 0.001}, {"center", true}, {"scale", true},
                           {"beta_initializer", initializer("Zeros")}, {"gamma_initializer", initializer("Ones")}},
                          json::array({keras_tensor("p1")})));
  json up = conv(4, 2, "linear");
  up["strides"] = {2, 2};
  up.erase("groups");  // Conv2DTranspose has none
  layers.push_back(layer3("Conv2DTranspose", "u1", up, json::array({keras_tensor("bn")})));
  layers.push_back(layer3("Concatenate", "cat", {{"axis", -1}},
                          json::array({json::array({keras_tensor("u1"), keras_tensor("c1")})})));
  layers.push_back(layer3("TrueDivide", "halve", json::object(), json::array({keras_tensor("cat"), 2}),
                          "keras.src.ops.numpy"));
  layers.push_back(layer3("Conv2D", "mask", conv(1, 1, "sigmoid"), json::array({keras_tensor("halve")})));
  return {{"module", "keras.src.models.functional"}, {"class_name", "Functional"},
          {"config", {{"name", "seed"}, {"layers", layers}, {"input_layers", {{"image", 0, 0}}},
                      {"output_layers", {{"mask", 0, 0}}}}},
          {"compile_config",
           {{"optimizer", {{"module", "keras.optimizers"}, {"class_name", "Adam"},
                           {"config", {{"name", "adam"}, {"learning_rate", 0.0010000000474974513}, {"beta_1", 0.9},
                                       {"epsilon", 1e-07}, {"use_ema", false}, {"clipnorm", nullptr}}}}},
            {"loss", "binary_crossentropy"},
            {"metrics", {"accuracy", {{"module", "builtins"}, {"class_name", "function"}, {"config", "mean_iou"}}}}}}};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return all;
}

ImportedModel import_json(const json& model) {
  return import_keras_model(parse_keras_json(model.dump(), "test"), {"seed.json", "seed.yaml", ""});
}

/// The layer named name of a config text.
YAML::Node layer_named(const Config& c, const std::string& name) {
  for (const LayerSpec& l : c.model.layers)
    if (l.name == name) return l.node;
  FAIL("no layer " << name);
  return {};
}

/// dir/seed.json (seed_model), imported to dir/seed.yaml and trained 1 epoch on data/sample into dir/run.
void trained_seed(const std::filesystem::path& dir) {
  std::ofstream(dir / "seed.json") << seed_model().dump();
  REQUIRE(run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "seed.yaml").string(), dir).code == 0);
  const std::string sample = std::string(TRAINER_SOURCE_DIR) + "/data/sample";
  const Run r = run_trainer("--config " + (dir / "seed.yaml").string() + " --images " + sample + "/images --masks " +
                                sample + "/masks --epochs 1 --output " + (dir / "run").string() + " --gpus cpu",
                            dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
}

}  // namespace

TEST_CASE("import: the seed network in Keras 3's JSON becomes a config that reads and builds", "[keras]") {
  const ImportedModel m = import_json(seed_model());
  INFO(m.yaml);
  INFO(joined(m.problems));
  REQUIRE(m.problems.empty());
  const Config c = parse_config(m.yaml, "seed.yaml");
  REQUIRE(c.model.layers.size() == 10);
  CHECK(c.model.name == "seed");
  CHECK(layer_named(c, "image")["shape"].as<std::vector<int>>() == std::vector<int>{32, 32, 3});
  const YAML::Node scale = layer_named(c, "scale");
  CHECK(scale["type"].as<std::string>() == "Rescaling");
  CHECK(scale["scale"].as<double>() == Approx(1.0 / 255).epsilon(1e-15));
  const YAML::Node c1 = layer_named(c, "c1");
  CHECK(c1["kernel_initializer"].as<std::string>() == "he_normal");
  CHECK(c1["kernel_size"].as<int>() == 3);
  CHECK(c1["activation"].as<std::string>() == "elu");
  CHECK_FALSE(c1["strides"]);       // Keras's default
  CHECK_FALSE(c1["bias_initializer"]);
  CHECK_FALSE(c1["inputs"]);        // the previous layer
  CHECK_FALSE(layer_named(c, "p1")["strides"]);  // = pool_size
  CHECK(layer_named(c, "u1")["strides"].as<int>() == 2);
  CHECK(layer_named(c, "cat")["inputs"].as<std::vector<std::string>>() == std::vector<std::string>{"u1", "c1"});
  const YAML::Node halve = layer_named(c, "halve");
  CHECK(halve["type"].as<std::string>() == "Rescaling");
  CHECK(halve["scale"].as<double>() == 0.5);
  CHECK(c.training.optimizer.learning_rate == Approx(1e-3).epsilon(1e-12));
  CHECK(m.yaml.find("learning_rate: 0.001}") != std::string::npos);  // the float32 in its fewest digits
  CHECK(c.training.metrics == std::vector<std::string>{"accuracy", "mean_iou"});
  CHECK(m.notes.size() == 3);  // the Lambda, the division, the custom mean_iou
}

TEST_CASE("import: Keras 2's layout (inbound_nodes as lists, BatchNormalization's axis [3]) and Sequential models",
          "[keras]") {
  json k2 = {{"class_name", "Functional"},
             {"config",
              {{"name", "k2"},
               {"layers",
                {{{"class_name", "InputLayer"}, {"name", "input_1"},
                  {"config", {{"batch_input_shape", {nullptr, 16, 16, 1}}, {"name", "input_1"}}}, {"inbound_nodes", json::array()}},
                 {{"class_name", "TFOpLambda"}, {"name", "tf.math.truediv"},
                  {"config", {{"name", "tf.math.truediv"}, {"function", "math.truediv"}, {"dtype", "float32"}}},
                  {"inbound_nodes", {{"input_1", 0, 0, {{"y", 255.0}, {"name", nullptr}}}}}},
                 {{"class_name", "Conv2D"}, {"name", "conv2d"}, {"config", conv(2, 3, "relu")},
                  {"inbound_nodes", {{{"tf.math.truediv", 0, 0, json::object()}}}}},
                 {{"class_name", "BatchNormalization"}, {"name", "bn"}, {"config", {{"axis", {3}}, {"momentum", 0.9}}},
                  {"inbound_nodes", {{{"conv2d", 0, 0, json::object()}}}}},
                 {{"class_name", "Concatenate"}, {"name", "cat"}, {"config", {{"axis", 3}}},
                  {"inbound_nodes", {{{"bn", 0, 0, json::object()}, {"conv2d", 0, 0, json::object()}}}}},
                 {{"class_name", "Conv2D"}, {"name", "out"}, {"config", conv(1, 1, "sigmoid")},
                  {"inbound_nodes", {{{"cat", 0, 0, json::object()}}}}}}},
               {"input_layers", {{"input_1", 0, 0}}},
               {"output_layers", {{"out", 0, 0}}}}}};
  ImportedModel m = import_json(k2);
  INFO(joined(m.problems));
  REQUIRE(m.problems.empty());
  Config c = parse_config(m.yaml, "k2.yaml");
  CHECK(layer_named(c, "tf.math.truediv")["scale"].as<double>() == Approx(1.0 / 255).epsilon(1e-15));
  CHECK_FALSE(layer_named(c, "bn")["axis"]);
  CHECK(layer_named(c, "bn")["momentum"].as<double>() == 0.9);
  CHECK(layer_named(c, "cat")["inputs"].as<std::vector<std::string>>() == std::vector<std::string>{"bn", "conv2d"});
  CHECK(c.training.loss.kind == LossKind::BinaryCrossentropy);  // not compiled: chosen from the sigmoid output

  // tf.keras 2's 1.0 - x: the constant as the first operand, the tensor in the keywords.
  k2["config"]["layers"][1] = {{"class_name", "TFOpLambda"}, {"name", "tf.math.subtract"},
                               {"config", {{"name", "tf.math.subtract"}, {"function", "math.subtract"}}},
                               {"inbound_nodes", {{"_CONSTANT_VALUE", -1, 1.0, {{"y", {"input_1", 0, 0}}, {"name", nullptr}}}}}};
  k2["config"]["layers"][2]["inbound_nodes"] = {{{"tf.math.subtract", 0, 0, json::object()}}};
  m = import_json(k2);
  INFO(joined(m.problems));
  REQUIRE(m.problems.empty());
  c = parse_config(m.yaml, "k2.yaml");
  CHECK(layer_named(c, "tf.math.subtract")["scale"].as<double>() == -1);
  CHECK(layer_named(c, "tf.math.subtract")["offset"].as<double>() == 1);

  json seq = {{"class_name", "Sequential"},
              {"config",
               {{"name", "seq"},
                {"layers",
                 {{{"class_name", "Conv2D"}, {"config", [] {
                     json c = conv(2, 3, "relu");
                     c["name"] = "first";
                     c["batch_input_shape"] = {nullptr, 8, 8, 3};
                     return c;
                   }()}},
                  {{"class_name", "Conv2D"}, {"config", [] {
                     json c = conv(1, 1, "sigmoid");
                     c["name"] = "second";
                     return c;
                   }()}}}}}}};
  m = import_json(seq);
  INFO(joined(m.problems));
  REQUIRE(m.problems.empty());
  c = parse_config(m.yaml, "seq.yaml");
  REQUIRE(c.model.layers.size() == 3);
  CHECK(c.model.layers[0].type == "Input");
  CHECK(c.model.layers[2].name == "second");
}

TEST_CASE("import: everything trainer cannot take is reported together, each with its layer", "[keras]") {
  json model = seed_model();
  json& layers = model["config"]["layers"];
  layers[1]["config"]["function"]["config"]["code"] = kSquare;              // Lambda x * x
  layers[2]["config"]["kernel_constraint"] = {{"class_name", "MaxNorm"}, {"config", {{"max_value", 2}}}};
  layers[3]["config"]["dtype"] = {{"class_name", "DTypePolicy"}, {"config", {{"name", "mixed_float16"}}}};
  layers[4]["class_name"] = "LSTM";
  model["compile_config"]["loss"] = {{"module", "builtins"}, {"class_name", "function"}, {"config", "dice_coef_loss"}};
  const ImportedModel m = import_json(model);
  CHECK(m.yaml.empty());
  const std::string all = joined(m.problems);
  INFO(all);
  CHECK(m.problems.size() == 5);
  CHECK(all.find("layer 'scale' (Lambda): its function is not x * scale + offset") != std::string::npos);
  CHECK(all.find("layer 'c1' (Conv2D)") != std::string::npos);
  CHECK(all.find("kernel_constraint") != std::string::npos);
  CHECK(all.find("layer 'd1' (Dropout): dtype policy 'mixed_float16'") != std::string::npos);
  CHECK(all.find("layer 'p1' (LSTM): trainer has no LSTM layer") != std::string::npos);
  CHECK(all.find("loss 'dice_coef_loss' is a function of your own") != std::string::npos);
}

TEST_CASE("import: two outputs, a shared layer and an input without a size are problems", "[keras]") {
  json model = seed_model();
  model["config"]["output_layers"] = {{"mask", 0, 0}, {"c1", 0, 0}};
  model["config"]["layers"][0]["config"]["batch_shape"] = {nullptr, nullptr, nullptr, 3};
  model["config"]["layers"][2]["inbound_nodes"].push_back(model["config"]["layers"][2]["inbound_nodes"][0]);
  const ImportedModel m = import_json(model);
  const std::string all = joined(m.problems);
  INFO(all);
  CHECK(all.find("2 outputs") != std::string::npos);
  CHECK(all.find("layer 'c1' (Conv2D): called 2 times") != std::string::npos);
  CHECK(all.find("layer 'image' (InputLayer): input shape [null,null,null,3]") != std::string::npos);
}

TEST_CASE("trainer import writes the config, refuses to replace files, and writes nothing for a model it cannot take",
          "[keras][cli]") {
  const auto dir = temp_dir("keras_import_cli");
  const auto model = dir / "seed.json";
  std::ofstream(model) << seed_model().dump();
  const auto config = dir / "seed.yaml";
  Run r = run_trainer("import " + model.string() + " --output " + config.string(), dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("the file holds no weights") != std::string::npos);
  const std::string text = slurp(config);
  CHECK(text.find("- {type: Rescaling, name: scale, scale: 0.00392156862745098}") != std::string::npos);
  CHECK(run_trainer("summary --config " + config.string(), dir).code == 0);

  r = run_trainer("import " + model.string() + " --output " + config.string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("exists; choose another name, or add --overwrite") != std::string::npos);
  CHECK(run_trainer("import " + model.string() + " --output " + config.string() + " --overwrite", dir).code == 0);

  json bad = seed_model();
  bad["config"]["layers"][4]["class_name"] = "LSTM";
  std::ofstream(dir / "bad.json") << bad.dump();
  r = run_trainer("import " + (dir / "bad.json").string() + " --output " + (dir / "bad.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("cannot be imported as it is (1 problem; nothing was written)") != std::string::npos);
  CHECK(r.err.find("layer 'p1' (LSTM)") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "bad.yaml"));

  std::ofstream(dir / "notes.txt") << "hello";
  r = run_trainer("import " + (dir / "notes.txt").string() + " --output " + (dir / "x.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("is not a Keras model file") != std::string::npos);
  std::ofstream(dir / "broken.json") << "{\"class_name\": \"Functional\", \"config\": {";
  r = run_trainer("import " + (dir / "broken.json").string() + " --output " + (dir / "x.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("is not valid JSON") != std::string::npos);
}

TEST_CASE("export --format keras writes a .keras file that import reads back to the same model and weights",
          "[keras][cli]") {
  const auto dir = temp_dir("keras_export_cli");
  trained_seed(dir);
  const auto keras = dir / "seed.keras";
  Run r = run_trainer("export --checkpoint " + (dir / "run" / "final.h5").string() + " --output " + keras.string(), dir);
  REQUIRE(r.code == 0);  // the format from the name
  CHECK(r.out.find("keras.models.load_model opens it") != std::string::npos);
  r = run_trainer("import " + keras.string() + " --output " + (dir / "back.yaml").string(), dir);
  REQUIRE(r.code == 0);
  const Checkpoint trained = load_checkpoint((dir / "run" / "final.h5").string());
  const Checkpoint back = load_checkpoint((dir / "back_weights.h5").string());
  REQUIRE(back.weights.size() == trained.weights.size());
  for (size_t i = 0; i < back.weights.size(); ++i) {
    CHECK(back.weights[i].layer == trained.weights[i].layer);
    CHECK(back.weights[i].name == trained.weights[i].name);
    CHECK(back.weights[i].values == trained.weights[i].values);
  }
  const auto layer_lines = [](const std::string& text) {  // the model's entries, comments left out
    std::istringstream in(text.substr(text.find("  layers:"), text.find("data:") - text.find("  layers:")));
    std::string kept;
    for (std::string line; std::getline(in, line);)
      if (line.find('#') == std::string::npos) kept += line + "\n";
    return kept;
  };
  CHECK(layer_lines(slurp(dir / "back.yaml")) == layer_lines(slurp(dir / "seed.yaml")));

  r = run_trainer("export --checkpoint " + (dir / "run" / "final.h5").string() + " --format keras --output " +
                      (dir / "seed.zip").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("does not end in .keras, which keras.models.load_model requires") != std::string::npos);
}

TEST_CASE("import: JSON of unexpected types, a cut .keras file and a zip that is no model are user errors",
          "[keras][cli]") {
  json model = seed_model();
  model["config"]["layers"][2]["inbound_nodes"] = "conv";  // a string where Keras writes a list
  model["config"]["layers"][3]["config"] = 5;
  model["config"]["layers"][4]["inbound_nodes"][0]["args"][0]["config"] = "x";
  const ImportedModel m = import_json(model);
  INFO(joined(m.problems));
  CHECK_FALSE(m.problems.empty());
  CHECK(m.yaml.empty());

  const auto dir = temp_dir("keras_import_damaged");
  std::ofstream(dir / "odd.json") << model.dump();
  Run r = run_trainer("import " + (dir / "odd.json").string() + " --output " + (dir / "odd.yaml").string(), dir);
  CHECK(r.code == 2);

  // A .keras file cut in half, and a zip without config.json.
  trained_seed(dir);
  REQUIRE(run_trainer("export --checkpoint " + (dir / "run" / "final.h5").string() + " --output " +
                          (dir / "seed.keras").string(), dir).code == 0);
  const std::string whole = slurp(dir / "seed.keras");
  std::ofstream(dir / "cut.keras", std::ios::binary) << whole.substr(0, whole.size() / 2);
  r = run_trainer("import " + (dir / "cut.keras").string() + " --output " + (dir / "cut.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("cannot be opened as a zip") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "cut.yaml"));
  std::string renamed = whole;  // the entry's name changed in the local header and the central directory
  for (size_t at = renamed.find("config.json"); at != std::string::npos; at = renamed.find("config.json", at + 1))
    renamed.replace(at, 11, "notes.jsonx");
  std::ofstream(dir / "other.keras", std::ios::binary) << renamed;
  r = run_trainer("import " + (dir / "other.keras").string() + " --output " + (dir / "other.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("holds no config.json") != std::string::npos);
  // A trainer checkpoint is not a Keras model.
  r = run_trainer("import " + (dir / "run" / "final.h5").string() + " --output " + (dir / "ckpt.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("is a trainer checkpoint, not a Keras model") != std::string::npos);
}

TEST_CASE("a .keras file's layers are numbered in Keras's model.layers order", "[keras]") {
  // img -> s (an operation) -> a -> c and s -> b -> d; img -> bn_e -> f; cat [d, f, c] -> out: Keras's
  // map_graph puts the deepest first and, at one depth, the first reached from the output.
  const std::vector<std::vector<int>> inputs = {{}, {0}, {1}, {1}, {2}, {3}, {0}, {6}, {5, 7, 4}, {8}};
  CHECK(keras_layer_order(inputs, 9) == std::vector<int>{0, 1, 3, 6, 2, 5, 7, 4, 8, 9});
  CHECK(keras_storage_names({"InputLayer", "Conv2D", "Conv2D", "BatchNormalization", "Conv2DTranspose", "Conv2D"}) ==
        std::vector<std::string>{"input_layer", "conv2d", "conv2d_1", "batch_normalization", "conv2d_transpose",
                                 "conv2d_2"});
}

TEST_CASE("import: no JSON value of another type than Keras writes escapes as anything but a problem", "[keras]") {
  const json model = seed_model();
  const std::vector<json> odd = {5, "x", json::array({1}), nullptr, json::object()};
  size_t tried = 0;
  // Every value at most four levels into each layer entry and into the compile config.
  std::function<void(json&, json&, int)> mutate = [&](json& root, json& at, int depth) {
    if (depth > 4 || !(at.is_object() || at.is_array())) return;
    for (auto it = at.begin(); it != at.end(); ++it) {
      const json kept = *it;
      for (const json& v : odd) {
        *it = v;
        ++tried;
        CHECK_NOTHROW(import_json(root));
      }
      *it = kept;
      mutate(root, *it, depth + 1);
    }
  };
  json copy = model;
  for (auto& layer : copy["config"]["layers"]) mutate(copy, layer, 1);
  mutate(copy, copy["compile_config"], 1);
  CHECK(tried > 500);
}

TEST_CASE("import: call keywords, Keras 2's hard_sigmoid, loss weights and YAML in names are problems", "[keras]") {
  json model = seed_model();
  auto& bn = model["config"]["layers"][5]["inbound_nodes"][0]["kwargs"];
  bn["training"] = false;  // Keras 3 records it and overrides it with fit's: nothing to report
  ImportedModel m = import_json(model);
  CHECK(m.problems.empty());
  bn["epsilon_override"] = 2;
  m = import_json(model);
  CHECK(joined(m.problems).find("layer 'bn' (BatchNormalization): called with epsilon_override=2") != std::string::npos);

  json k2 = seed_model();
  k2["keras_version"] = "2.15.0";
  k2["config"]["layers"][2]["config"]["activation"] = "hard_sigmoid";
  m = import_json(k2);
  CHECK(joined(m.problems).find("Keras 2.15.0's hard_sigmoid is clip(0.2 x + 0.5, 0, 1)") != std::string::npos);

  json weighted = seed_model();
  weighted["compile_config"]["loss_weights"] = {0.1};
  CHECK(joined(import_json(weighted).problems).find("loss_weights [0.1]") != std::string::npos);
  weighted["compile_config"]["loss_weights"] = {1.0};
  CHECK(import_json(weighted).problems.empty());

  json inject = seed_model();
  inject["compile_config"]["loss"] = "binary_crossentropy\n  output_dir: /tmp/elsewhere";
  m = import_json(inject);
  CHECK_FALSE(m.problems.empty());  // one string, not two keys
  inject["compile_config"]["loss"] = {{"class_name", "BinaryCrossentropy"},
                                      {"config", {{"fn", "binary_crossentropy"}, {"reduction", "auto"}, {"name", "bce"}}}};
  m = import_json(inject);  // tf.keras 2's loss object
  INFO(joined(m.problems));
  CHECK(m.problems.empty());
}

TEST_CASE("import: Keras's AUC and MeanIoU metric objects become auc, binary_iou or mean_io_u", "[keras]") {
  const auto metrics_of = [](const json& list, std::string* problems = nullptr, const json& loss = nullptr) {
    json model = seed_model();
    model["compile_config"]["metrics"] = list;
    if (!loss.is_null()) model["compile_config"]["loss"] = loss;
    const ImportedModel m = import_json(model);
    if (problems) *problems = joined(m.problems);
    if (!m.problems.empty()) return std::vector<std::string>{};
    return parse_config(m.yaml, "m.yaml").training.metrics;
  };
  const auto object = [](const char* cls, const json& config) {
    return json{{"module", "keras.metrics"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr}};
  };
  const json auc = {{"name", "auc"},         {"num_thresholds", 200},     {"curve", "ROC"},
                    {"summation_method", "interpolation"}, {"multi_label", false}, {"num_labels", nullptr},
                    {"label_weights", nullptr}, {"from_logits", false}};
  CHECK(metrics_of(json::array({object("AUC", auc), "AUC"})) == std::vector<std::string>{"auc"});
  json pr = auc;
  pr["curve"] = "PR";
  std::string problems;
  CHECK(metrics_of(json::array({object("AUC", pr)}), &problems).empty());
  CHECK_THAT(problems, Catch::Contains("differs from Keras's default AUC()"));
  // MeanIoU of 2 classes on class ids (a sigmoid's probabilities in Keras): binary_iou.
  CHECK(metrics_of(json::array({object("MeanIoU", {{"num_classes", 2}, {"sparse_y_pred", true}})})) ==
        std::vector<std::string>{"binary_iou"});
  // Beside BinaryIoU it is the same value: left out, and the config says so where it is read.
  json both = seed_model();
  both["compile_config"]["metrics"] =
      json::array({object("BinaryIoU", json::object()), object("MeanIoU", {{"num_classes", 2}})});
  const ImportedModel m = import_json(both);
  REQUIRE(m.problems.empty());
  CHECK(parse_config(m.yaml, "m.yaml").training.metrics == std::vector<std::string>{"binary_io_u"});
  CHECK_THAT(m.yaml, Catch::Contains("  # metric MeanIoU(num_classes=2) is taken as binary_iou") &&
                         Catch::Contains("  # binary_iou (from MeanIoU) is left out"));
  // With a categorical loss: Keras's MeanIoU on the argmax of the softmax (sparse_y_pred=False).
  const json categorical = "sparse_categorical_crossentropy";
  CHECK(metrics_of(json::array({object("MeanIoU", {{"num_classes", 3}, {"sparse_y_pred", false}})}), nullptr,
                   categorical) == std::vector<std::string>{"mean_io_u"});
  CHECK(metrics_of(json::array({object("MeanIoU", {{"num_classes", 2}})}), nullptr, categorical) ==
        std::vector<std::string>{"mean_io_u"});
  CHECK(metrics_of(json::array({object("MeanIoU", {{"num_classes", 3}})}), &problems).empty());  // a binary loss
  CHECK_THAT(problems, Catch::Contains("MeanIoU(num_classes=3) with a binary loss"));
  json logits = auc;
  logits["from_logits"] = true;  // as the loss: the output is logits
  CHECK(metrics_of(json::array({object("AUC", logits)})).empty());  // the loss takes probabilities
  const json logits_loss = {{"class_name", "BinaryCrossentropy"}, {"config", {{"from_logits", true}}}};
  CHECK(metrics_of(json::array({object("AUC", logits)}), nullptr, logits_loss) == std::vector<std::string>{"auc"});
}

TEST_CASE("import and export refuse to overwrite what is not theirs", "[keras][cli]") {
  const auto dir = temp_dir("keras_outputs");
  std::ofstream(dir / "seed.json") << seed_model().dump();
  Run r = run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "same.yaml").string() +
                          " --weights " + (dir / "same.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("--output and --weights both name") != std::string::npos);
  r = run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "seed.json").string() + " --overwrite", dir);
  CHECK(r.code == 2);
  CHECK(slurp(dir / "seed.json") == seed_model().dump());

  trained_seed(dir);
  const std::string export_to = "export --checkpoint " + (dir / "run" / "final.h5").string() + " --output ";
  std::ofstream(dir / "mine.keras") << "a Keras model of the user's own";
  r = run_trainer(export_to + (dir / "mine.keras").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("exists and is not an earlier export") != std::string::npos);
  CHECK(slurp(dir / "mine.keras") == "a Keras model of the user's own");
  CHECK(run_trainer(export_to + (dir / "ours.keras").string(), dir).code == 0);
  CHECK(run_trainer(export_to + (dir / "ours.keras").string(), dir).code == 0);  // its own export: replaced
  CHECK(run_trainer(export_to + (dir / "mine.keras").string() + " --overwrite", dir).code == 0);
  r = run_trainer(export_to + (dir / "model.h5").string(), dir);  // Keras's legacy name, but export writes no .h5
  CHECK(r.code == 2);
  CHECK(r.err.find("name it e.g. unet.keras") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "model.h5"));
}

TEST_CASE("import --no-compile leaves out a loss and metrics of the user's own", "[keras][cli]") {
  const auto dir = temp_dir("keras_no_compile");
  json model = seed_model();
  model["compile_config"]["loss"] = {{"module", "builtins"}, {"class_name", "function"}, {"config", "bce_dice_loss"}};
  std::ofstream(dir / "seed.json") << model.dump();
  Run r = run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "seed.yaml").string(), dir);
  CHECK(r.code == 2);
  CHECK(r.err.find("import with --no-compile") != std::string::npos);
  r = run_trainer("import " + (dir / "seed.json").string() + " --output " + (dir / "seed.yaml").string() +
                      " --no-compile", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Config c = parse_config(slurp(dir / "seed.yaml"), "seed.yaml");
  CHECK(c.training.loss.kind == LossKind::BinaryCrossentropy);
  CHECK(c.training.metrics.empty());
  CHECK(c.data.mask_suffix == "_mask");
}

TEST_CASE("export --format keras writes a config's YAML 1.1 booleans as JSON booleans", "[keras]") {
  const Config c = parse_config(R"(model:
  layers:
    - {type: Input, name: image, shape: [8, 8, 1]}
    - {type: Conv2D, name: c, filters: 2, kernel_size: 3, use_bias: no, padding: same}
    - {type: BatchNormalization, name: bn, center: off}
    - {type: Conv2D, name: out, filters: 1, kernel_size: 1, activation: sigmoid}
data: {images: i, masks: m}
training: {loss: binary_crossentropy}
)", "bools.yaml");
  const Model model(c.model, c.path);
  const json k = keras_model_config(c.model, model, OutputActivation::Sigmoid);
  const json& layers = k["config"]["layers"];
  CHECK(layers[1]["config"]["use_bias"] == false);
  CHECK(layers[1]["config"]["kernel_size"] == 3);
  CHECK(layers[2]["config"]["center"] == false);
  CHECK(layers.back()["class_name"] == "Activation");
  CHECK(layers.back()["name"] == "probability");
}
