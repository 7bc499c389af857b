include $(sort $(wildcard $(BR2_EXTERNAL_OUTPOST_PATH)/package/*/*.mk))
