import torch, torch.distributed as dist, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                  nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
ddp = DDP(m, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(5):
    x = torch.randn(8, 3, 16, 16); y = torch.randint(0, 10, (8,))
    opt.zero_grad(); nn.functional.cross_entropy(ddp(x), y).backward(); opt.step()
dist.destroy_process_group()
