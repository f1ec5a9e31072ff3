package slots

import "fmt"

// The shard selector of a replica holding slots 0 and 1 of 4, and where a
// namespace falls.
func ExampleSelector() {
	fmt.Println(Selector("object.metadata.namespace", New(4, 0, 1)))
	fmt.Println(Of(Hash("default"), 4))
	// Output:
	// shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')
	// 3
}
