#pragma once
// A check of an HDF5 file's global heap collections before libhdf5 reads
// them. They hold the variable-length strings (a checkpoint's config text,
// Keras's model_config), and libhdf5 1.10 parses a collection by walking
// its objects by their stated sizes: an object of size 0 makes it loop
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
/// collection of the HDF5 data of `size` bytes that read gives holds an
/// object whose size is 0 where libhdf5 would not move on, or that runs
/// past the collection's end. Collections are found by their signature
/// "GCOL" with version 1, lengths of 8 bytes (the library's default),
/// and a size from 4096 bytes (its smallest) to the end of the data;
/// anything else is left to libhdf5's own checks. Reads the data once.
void check_global_heaps(size_t size, const ReadAt& read);

/// check_global_heaps of the file at path (a file that cannot be read is left to libhdf5).
void check_global_heaps(const std::string& path);

}  // namespace trainer::h5
