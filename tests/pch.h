// The headers every test file parses (GoogleTest, GoogleMock, fmt, JSON, the standard library's
// common ones), precompiled once for all the test programs (tests/CMakeLists.txt): parsing them
// was a third of a test file's compile time.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
