#pragma once
// A check of an HDF5 file's global heap collections before libhdf5 reads
// them. They hold the variable-length strings (a checkpoint's config text,
// Keras's model_config), and libhdf5 1.10 parses a collection by walking
// its objects by their stated sizes: a free-space object (index 0) of size
// 0, or an object whose header and size wrap around to 0, makes it loop
// without end, and one larger than its collection makes it read past it
// (found by tests/fuzz). Layout: HDF5 File Format Specification version
// 2.0, section III.E, "Global Heap".
#include <cstddef>
#include <functional>
#include <string>

namespace trainer::h5 {

/// Reads up to n bytes at offset into out; returns how many it read (fewer at the end of the data).
using ReadAt = std::function<size_t(size_t offset, size_t n, char* out)>;

/// Throws H5Failure ("global heap collection at byte <offset> ...") when a
/// collection of the HDF5 data of `size` bytes that read gives holds a
/// free-space object of size 0, or an object that runs past the
/// collection's end. Collections are found by their signature "GCOL" with
/// version 1 and a size within the data, in files whose superblock gives
/// lengths of 8 bytes (the library's default; other files are left to
/// libhdf5's own checks). A collection that an in-place edit freed and left
/// behind is walked as well. Reads each byte at most twice.
void check_global_heaps(size_t size, const ReadAt& read);

/// check_global_heaps of the file at path (a file that cannot be read is left to libhdf5).
void check_global_heaps(const std::string& path);

}  // namespace trainer::h5
