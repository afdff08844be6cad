// Everything a plugin author needs: include this one header. It also brings
// the helpers the built-in plugins use (allocation.hpp, discretized_queues.hpp,
// gpu_choice.hpp, kube_score.hpp); the LP wrapper (lp.hpp) needs GLPK and is
// included on its own.
#pragma once

#include "tessel/abi_layout.hpp"
#include "tessel/allocation.hpp"
#include "tessel/cluster.hpp"
#include "tessel/discretized_queues.hpp"
#include "tessel/goodput.hpp"
#include "tessel/gpu_choice.hpp"
#include "tessel/ids.hpp"
#include "tessel/job.hpp"
#include "tessel/kube_score.hpp"
#include "tessel/lab.hpp"
#include "tessel/parallelism.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"
#include "tessel/rng.hpp"
#include "tessel/slots.hpp"
#include "tessel/stages.hpp"
#include "tessel/throughput.hpp"
#include "tessel/view.hpp"
