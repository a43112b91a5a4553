// Helpers shared by the tests: where the data lives, and skipping when it is absent.
#pragma once

#include <string>

namespace trellis::testing {

// The ../shared folder beside the checkout (models, tokenizer vectors, reference outputs).
std::string shared_dir();
// True when shared_dir() exists; tests that need it call GTEST_SKIP() otherwise.
bool have_shared_dir();
// A fresh empty directory for this test's files, removed at process exit.
std::string temp_dir();

}  // namespace trellis::testing

// Skips the current test with a clear message when ../shared is absent.
#define TRELLIS_REQUIRE_SHARED()                                                        \
  do {                                                                                  \
    if (!::trellis::testing::have_shared_dir())                                         \
      GTEST_SKIP() << "needs " << ::trellis::testing::shared_dir() << " (not present)"; \
  } while (0)
