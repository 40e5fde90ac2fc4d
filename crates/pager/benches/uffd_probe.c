/* The floor of a userfaultfd missing fault on these machines, side by side
 * with the kernel's own first touch of shmem (memfd): nothing but the ioctl
 * per fault. Referenced by docs/pager.md.
 *   gcc -O2 -o /tmp/uffd_probe crates/pager/benches/uffd_probe.c -lpthread
 *   /tmp/uffd_probe MODE     (prints the median ns per fault and the ratio)
 * MODE bits: 1 UFFDIO_COPY of a zero page (else fallocate + UFFDIO_CONTINUE),
 * 4 poll before read, 8 non-blocking read (spinning handler),
 * 16 SIGBUS: the faulting thread serves itself (else one handler thread),
 * 32 UFFDIO_ZEROPAGE. Used: 33 / 37 (handler, blocking read / poll + read),
 * 9 (spinning), 17 / 49 (faulting thread, copy / zeropage). */
#define _GNU_SOURCE
#include <linux/userfaultfd.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#define P 4096
#define N 4096
static int uffd, memfd, mode; static char *app; static char zeros[P] __attribute__((aligned(4096)));
static long ns(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static void *handler(void*a){ struct uffd_msg m[16];
 for(;;){ if(mode&4){struct pollfd p={uffd,POLLIN};poll(&p,1,-1);} int n=read(uffd,m,sizeof m); if(n<=0)continue;
  for(int i=0;i<n/(int)sizeof(m[0]);i++){ unsigned long addr=m[i].arg.pagefault.address&~(P-1);
   if(mode&32){ struct uffdio_zeropage z={{addr,P},0,0}; if(ioctl(uffd,UFFDIO_ZEROPAGE,&z))perror("zp");} else if(mode&1){ struct uffdio_copy c={addr,(unsigned long)zeros,P,0,0}; ioctl(uffd,UFFDIO_COPY,&c);}
   else { fallocate(memfd,0,addr-(unsigned long)app,P); struct uffdio_continue c={{addr,P},0,0}; ioctl(uffd,UFFDIO_CONTINUE,&c);} }}}
static void onbus(int sig, siginfo_t*si, void*ctx){ unsigned long addr=(unsigned long)si->si_addr&~(P-1);
 if(mode&32){ struct uffdio_zeropage z={{addr,P},0,0}; if(ioctl(uffd,UFFDIO_ZEROPAGE,&z))perror("zp");} else if(mode&1){ struct uffdio_copy c={addr,(unsigned long)zeros,P,0,0}; ioctl(uffd,UFFDIO_COPY,&c);} else { fallocate(memfd,0,addr-(unsigned long)app,P); struct uffdio_continue c={{addr,P},0,0}; ioctl(uffd,UFFDIO_CONTINUE,&c);} }
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
static long med(char*b){ static long t[N]; for(int i=0;i<N;i++){long t0=ns(); b[i*P]=1; t[i]=ns()-t0;} qsort(t,N,8,cmp); return t[N/2];}
int main(int c,char**v){ mode=atoi(v[1]);
 int k=memfd_create("k",0); ftruncate(k,N*P); char*kb=mmap(0,N*P,3,MAP_SHARED,k,0); long kk=med(kb);
 uffd=syscall(SYS_userfaultfd,O_CLOEXEC|((mode&8)?O_NONBLOCK:0)); struct uffdio_api api={UFFD_API,(mode&16)?UFFD_FEATURE_SIGBUS:0}; ioctl(uffd,UFFDIO_API,&api);
 memfd=memfd_create("m",0); ftruncate(memfd,N*P); app=mmap(0,N*P,3,MAP_SHARED,memfd,0);
 struct uffdio_register r={{(unsigned long)app,N*P},UFFDIO_REGISTER_MODE_MISSING|UFFDIO_REGISTER_MODE_MINOR,0}; if(ioctl(uffd,UFFDIO_REGISTER,&r))perror("reg");
 if(mode&16){struct sigaction sa={0}; sa.sa_sigaction=onbus; sa.sa_flags=SA_SIGINFO; sigaction(SIGBUS,&sa,0);} else { pthread_t t; pthread_create(&t,0,handler,0);} usleep(1000); long pp=med(app);
 printf("mode %d kernel %ld pp %ld ratio %.2f\n",mode,kk,pp,(double)pp/kk); return 0;}
