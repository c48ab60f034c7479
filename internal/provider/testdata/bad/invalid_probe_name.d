provider myapp {
	probe order-placed(uint64_t order_id, int64_t cents);
};
