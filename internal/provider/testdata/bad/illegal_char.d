provider myapp {
	probe start(int @port);
};
  #pragma D attributes Evolving/Evolving/Common provider myapp provider
provider b { probe x(); }; #pragma not at line start
