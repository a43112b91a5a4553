// The quoting that puts a results folder's name into a shell command and a gnuplot script.
#include <gtest/gtest.h>

#include "bench/plot.h"

namespace trellis::bench {
namespace {

TEST(PlotQuoteTest, ShellQuote) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("bench-results/phi"), "'bench-results/phi'");
  EXPECT_EQ(shell_quote("phi out's"), "'phi out'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf x); `y`"), "'$(rm -rf x); `y`'");
  EXPECT_EQ(shell_quote("''"), "''\\'''\\'''");
}

TEST(PlotQuoteTest, GnuplotQuote) {
  EXPECT_EQ(gnuplot_quote(""), "''");
  EXPECT_EQ(gnuplot_quote("phi.png"), "'phi.png'");
  EXPECT_EQ(gnuplot_quote("it's"), "'it''s'");
  EXPECT_EQ(gnuplot_quote("a\nb\rc"), "'a b c'");
  EXPECT_EQ(gnuplot_quote("\"x\" \\n"), "'\"x\" \\n'");
}

}  // namespace
}  // namespace trellis::bench
