// TRANSITION: the flag struct is EngineOptions now.
#pragma once
#include "engine_options.h"
