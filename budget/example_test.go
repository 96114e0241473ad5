package budget_test

import (
	"context"
	"fmt"

	"github.com/piperun/piperun/budget"
)

// ExampleBudget reserves bytes, is refused past the limit, and reports the
// peak.
func ExampleBudget() {
	b := budget.New(100)
	ctx := context.Background()
	_ = b.Acquire(ctx, 60)
	fmt.Println(b.TryAcquire(50), b.Used())
	b.Release(60)
	fmt.Println(b.TryAcquire(50), b.Used(), b.Peak())
	fmt.Println(b.Acquire(ctx, 200))
	// Output:
	// false 60
	// true 50 60
	// a sample of 200B exceeds the whole memory budget of 100B; raise resources.memory to at least 200B, the least that holds it alone
}
