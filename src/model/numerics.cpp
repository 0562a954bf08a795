#include "model/numerics.h"

namespace deepinfer::model {
namespace {

NumericsHooks& official_hooks() {
  static NumericsHooks hooks;
  return hooks;
}

}  // namespace

const NumericsHooks& numerics_hooks(Numerics mode) {
  static const NumericsHooks exact;
  return mode == Numerics::Exact ? exact : official_hooks();
}

void set_official_hooks(const NumericsHooks& hooks) { official_hooks() = hooks; }

}  // namespace deepinfer::model
