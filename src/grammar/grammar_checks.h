// The analyses that make a Grammar safe to run: unproductive alternatives removed (so every
// configuration the automaton reaches can still complete), left recursion refused (so expanding
// a configuration always terminates).
#pragma once

#include "base/result.h"
#include "grammar/grammar.h"

namespace trellis {

// Removes every alternative that can match no string. Errors: root itself matches no string.
Status prune_unproductive(Grammar& grammar);

// Errors: a rule that can reach itself without consuming a byte, named.
Status check_left_recursion(const Grammar& grammar);

}  // namespace trellis
