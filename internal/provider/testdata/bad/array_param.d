provider myapp {
	probe name(char name[16]);
};
