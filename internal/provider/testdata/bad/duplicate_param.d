provider myapp {
	probe copy(void *buf, size_t len, void *buf);
};
