// The headers most of the library's sources parse (the standard library's common ones, fmt, JSON),
// precompiled once per build for every layer but the kernels (CMakeLists.txt, atto_layer): parsing
// them was about a sixth of a source's compile time. A source still includes what it uses.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
