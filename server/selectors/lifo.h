// LifoSelector: always selects the newest key still present, with probability
// 1.0 (docs/concepts/selectors.md). The contract is InsertionOrderSelector's.
#ifndef TF_REVERB_SERVER_SELECTORS_LIFO_H_
#define TF_REVERB_SERVER_SELECTORS_LIFO_H_

#include "server/selectors/insertion_order.h"

namespace tf_reverb {

class LifoSelector : public InsertionOrderSelector {
 public:
  LifoSelector() : InsertionOrderSelector(Pick::kNewest) {}
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_LIFO_H_
