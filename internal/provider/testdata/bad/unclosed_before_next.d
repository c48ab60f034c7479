provider first {
	probe a();

provider second {
	probe b();
};
