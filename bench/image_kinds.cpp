// bench/image_kinds FILE...: the kind of each DSB 2018 image, one "name,kind" line per file, as the
// competition's images fall into three: fluorescence (gray nuclei on a dark background), brightfield (gray,
// light background) and histology (stained tissue in colour). The rule: mean |R - G| + |G - B| above 15 is
// histology; else a mean intensity below 128 fluorescence, and brightfield above. Used by
// bench/nuclei_quality.sh to split the instance scores by kind.
#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const cv::Mat bgr = cv::imread(argv[i], cv::IMREAD_COLOR);
    if (bgr.empty()) {
      std::fprintf(stderr, "cannot decode '%s'\n", argv[i]);
      return 2;
    }
    cv::Mat f;
    bgr.convertTo(f, CV_32F);
    std::vector<cv::Mat> c;
    cv::split(f, c);  // B, G, R
    const double colour = cv::mean(cv::abs(c[2] - c[1]))[0] + cv::mean(cv::abs(c[1] - c[0]))[0];
    const double gray = cv::mean(f)[0] / 3 + cv::mean(f)[1] / 3 + cv::mean(f)[2] / 3;
    const char* kind = colour > 15 ? "histology" : gray < 128 ? "fluorescence" : "brightfield";
    std::printf("%s,%s\n", std::filesystem::path(argv[i]).filename().string().c_str(), kind);
  }
  return 0;
}
