// Fuzz targets whose entry point takes a path write the input into a
// folder of their own, made once per process and removed at exit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pvllm::fuzz {

// The process's folder (created on first use).
const std::string& temp_dir();
// Writes `size` bytes to temp_dir()/name and returns the path.
std::string write_temp_file(const std::string& name, const uint8_t* data, size_t size);

}  // namespace pvllm::fuzz
