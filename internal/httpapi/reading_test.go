package httpapi

import "testing"

func TestReadingBudget(t *testing.T) {
	b := NewReadingBudget(10, 4)
	if !b.Take("a", 4) || b.Take("a", 1) {
		t.Fatal("one client may hold its share and no more")
	}
	if !b.Take("b", 3) || !b.Take("c", 3) || b.Take("d", 1) {
		t.Fatal("clients share the total, and nothing is taken beyond it")
	}
	b.Give("a", 4)
	if !b.Take("d", 4) {
		t.Fatal("what a client gave back is free for the others")
	}
	b.Give("b", 3)
	b.Give("c", 3)
	b.Give("d", 4)
	if len(b.byClient) != 0 || b.used != 0 {
		t.Fatalf("everything given back, yet %d used, clients %v", b.used, b.byClient)
	}
	var none *ReadingBudget
	if !none.Take("a", 1<<40) {
		t.Fatal("no budget bounds nothing")
	}
	none.Give("a", 1<<40)
}
