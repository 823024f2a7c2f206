#include "io/hdf5_heap_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "io/hdf5_util.h"

namespace trainer::h5 {

namespace {

constexpr size_t kHeader = 16;       // "GCOL", version, 3 reserved bytes, the collection's size (8 bytes)
constexpr size_t kObjectHeader = 16; // index (2), reference count (2), reserved (4), size (8)

uint64_t little_endian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

/// Walks the objects of the collection c (its whole bytes) as libhdf5 does; throws at the first that would
/// stop it moving on or take it past the end. at: the collection's offset, for the message.
void walk_objects(const std::vector<char>& c, size_t at) {
  for (size_t p = kHeader; p < c.size();) {
    if (p + kObjectHeader > c.size()) return;  // too small for an object: free space
    const uint64_t index = little_endian(&c[p], 2);
    const uint64_t size = little_endian(&c[p + 8], 8);
    // Objects take their header and their data rounded up to 8 bytes; the free space (index 0) its size alone.
    const uint64_t room = c.size() - p;
    const bool fits = index > 0 ? size <= room - kObjectHeader : size <= room;
    if ((index == 0 && size == 0) || !fits)
      throw H5Failure("global heap collection at byte " + std::to_string(at) + ": object " + std::to_string(index) +
                      " at byte " + std::to_string(at + p) + " claims " +
                      (size == 0 ? std::string("0 bytes of free space")
                                 : std::to_string(size) + " bytes, which do not fit in its " +
                                       std::to_string(c.size()) + "-byte collection"));
    p += index > 0 ? kObjectHeader + ((size + 7) & ~uint64_t(7)) : size;
  }
}

/// Checks the collection whose signature is at byte `at`, when the rest of its header makes it one; returns
/// its size (0 when it is none).
size_t check_collection(size_t size, const ReadAt& read, size_t at) {
  char header[kHeader];
  if (read(at, kHeader, header) != kHeader || header[4] != 1 || header[5] || header[6] || header[7]) return 0;
  const uint64_t bytes = little_endian(header + 8, 8);
  if (bytes < kHeader || bytes > size - at) return 0;  // libhdf5 cannot read it either
  std::vector<char> c(bytes);
  if (read(at, bytes, c.data()) != bytes) return 0;
  walk_objects(c, at);
  return bytes;
}

/// The size of lengths the superblock gives (HDF5 File Format Specification, II.A: byte 14 of versions 0 and
/// 1, byte 10 of versions 2 and 3), the superblock being at byte 0, 512, 1024, 2048, ...; 0 when none is found.
int size_of_lengths(size_t size, const ReadAt& read) {
  for (size_t at = 0; at + 16 <= size; at = at ? at * 2 : 512) {
    char b[16];
    if (read(at, 16, b) != 16 || std::memcmp(b, "\x89HDF\r\n\x1a\n", 8) != 0) continue;
    return b[8] <= 1 ? b[14] : b[10];
  }
  return 0;
}

}  // namespace

void check_global_heaps(size_t size, const ReadAt& read) {
  if (size_of_lengths(size, read) != 8) return;  // the layout walked here; libhdf5 writes 8 unless told otherwise
  constexpr size_t kChunk = size_t(1) << 20;
  std::vector<char> chunk(kChunk + 3);
  // Chunks overlap by 3 bytes, so that a signature across their border is seen (once). The scan goes on after
  // a collection that passed, so that every byte is read at most twice.
  size_t next = 0;
  for (size_t start = 0; start < size; start += kChunk) {
    const size_t n = read(start, std::min(kChunk + 3, size - start), chunk.data());
    for (size_t k = next > start ? next - start : 0; k + 4 <= n; ++k) {
      const void* g = std::memchr(chunk.data() + k, 'G', n - 3 - k);
      if (!g) break;
      k = size_t(static_cast<const char*>(g) - chunk.data());
      if (std::memcmp(chunk.data() + k, "GCOL", 4) != 0) continue;
      if (const size_t bytes = check_collection(size, read, start + k)) {
        next = start + k + bytes;
        if (next - start >= n) break;
        k = next - start - 1;
      }
    }
  }
}

void check_global_heaps(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.seekg(0, std::ios::end)) return;
  const std::streamoff end = in.tellg();
  if (end <= 0) return;
  check_global_heaps(size_t(end), [&](size_t offset, size_t n, char* out) {
    in.clear();
    in.seekg(std::streamoff(offset));
    in.read(out, std::streamsize(n));
    return size_t(in.gcount());
  });
}

}  // namespace trainer::h5
